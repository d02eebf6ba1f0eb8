"""The models of the TensorRT-LLM matrix, as upstream's own tests of them build the ``LLM``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.trtllm.llm_config import CudaGraphSpec, LlmSpec
from regress.trtllm.requirements import BLACKWELL, HOPPER, Needs, in_sm100_family


@dataclass(frozen=True)
class UpstreamTest:
    """An upstream test a case's settings were read from."""

    node: str  # "TestGLM52NVFP4::test_mtp_index_share"
    path: str
    commit: str

    def cite(self) -> str:
        return f"{self.path}::{self.node} @ {self.commit[:8]}"


@dataclass(frozen=True)
class UpstreamVariant:
    """One upstream test id run as upstream builds it (``test_upstream_config``).

    Attributes:
        name: the id (``baseline_mtp1``).
        test: where it is.
        options: ``LlmSpec`` fields this id sets on top of the model's.
        min_sm: the id's own architecture floor (``heuristic_topk_mtp1`` skips below 100).
    """

    name: str
    test: UpstreamTest
    options: tuple[tuple[str, Any], ...] = ()
    min_sm: int | None = None


@dataclass(frozen=True, eq=False)
class ModelCase:
    """One model of the matrix and how upstream's own test of it builds the ``LLM``.

    Compared and hashed by identity: the two models are module constants, and cases (keys of
    the session's run cache) hash through them.

    Attributes:
        test_class: upstream's test class name (prefix of our reference keys and artifacts).
        checkpoint: directory name under ``$LLM_MODELS_ROOT``.
        tensor_parallel_size: TP; the GPU count needed.
        min_sm: oldest architecture the checkpoint runs on.
        min_memory_mib: per-GPU memory floor, or None.
        options: ``LlmSpec`` fields upstream's test sets on every architecture.
        sm100_options: fields upstream sets on SM 100/103 only (override ``options``).
        cuda_graph: upstream's ``CudaGraphConfig(...)`` when graphs are on.
        mtp_spelling: how upstream's test passes K (``regress.trtllm.llm_config.MTP_SPELLINGS``).
        upstream: the test these settings were read from.
        acceptance_key: upstream's ``acceptance_length.yaml`` key for this model's MTP test.
        acceptance_draft_len: the K upstream's test runs (its key was measured at).
        variants: upstream ids ``test_upstream_config`` runs as upstream builds them.
        index_share_axis: the checkpoint sets ``index_share_for_mtp_iteration`` (GLM-5.2).
        why: why TP and architecture are what they are (shown in docs and reports).
    """

    test_class: str
    checkpoint: str
    tensor_parallel_size: int
    min_sm: int
    min_memory_mib: int | None
    options: tuple[tuple[str, Any], ...]
    sm100_options: tuple[tuple[str, Any], ...]
    cuda_graph: CudaGraphSpec
    mtp_spelling: str
    upstream: UpstreamTest
    acceptance_key: str | None
    acceptance_draft_len: int
    variants: tuple[UpstreamVariant, ...]
    index_share_axis: bool
    why: str

    @property
    def needs(self) -> Needs:
        return Needs(
            checkpoint=self.checkpoint,
            gpus=self.tensor_parallel_size,
            min_sm=self.min_sm,
            min_memory_mib=self.min_memory_mib,
        )

    def spec_options(self, sm: int | None) -> dict[str, Any]:
        """Upstream's ``LlmSpec`` fields on a GPU of compute capability ``sm`` (None: unknown).

        The SM 100/103 settings apply to exactly those parts, as upstream's test switches on
        an SM version of exactly 100 or 103 (SM120 keeps the others).
        """
        chosen = dict(self.options)
        if in_sm100_family(sm):
            chosen.update(self.sm100_options)
        return chosen

    def variant(self, name: str) -> UpstreamVariant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(f"{self.test_class} has no upstream variant {name!r}")

    def upstream_spec(
        self, model_dir: Path | str, *, sm: int | None = None, variant: str | None = None
    ) -> LlmSpec:
        """The ``LLM`` spec of upstream's test itself (the ``always`` deviations aside)."""
        fields = self.spec_options(sm)
        if variant is not None:
            fields.update(self.variant(variant).options)
        fields.setdefault("max_batch_size", None)
        return LlmSpec(
            model=str(model_dir),
            tensor_parallel_size=self.tensor_parallel_size,
            max_draft_len=self.acceptance_draft_len,
            mtp_spelling=self.mtp_spelling,
            cuda_graph_config=self.cuda_graph,
            enable_block_reuse=None,
            **fields,
        )


_DSV32_TEST = UpstreamTest(
    "TestDeepSeekV32::test_fp8_blockscale[baseline_mtp1]",
    "tests/integration/defs/accuracy/test_llm_api_pytorch.py",
    "000b1b9b4b0605d18aa3b95ac2693d68ded23020",
)

DEEPSEEK_V32 = ModelCase(
    test_class="TestDeepSeekV32",
    checkpoint="DeepSeek-V3.2-Exp-hf",
    tensor_parallel_size=8,
    min_sm=HOPPER,
    min_memory_mib=140_000,
    options=(
        ("pipeline_parallel_size", 1),
        ("moe_expert_parallel_size", 8),
        ("max_batch_size", 24),
        ("enable_attention_dp", True),
        ("disable_overlap_scheduler", False),
        ("free_gpu_memory_fraction", 0.7),
    ),
    sm100_options=(
        ("moe_backend", "DEEPGEMM"),
        ("moe_max_num_tokens", 16384),
        ("free_gpu_memory_fraction", 0.6),
    ),
    cuda_graph=CudaGraphSpec(),
    mtp_spelling="num_nextn_predict_layers",
    upstream=_DSV32_TEST,
    acceptance_key="TestDeepSeekV32::test_fp8_blockscale[baseline_mtp1]",
    acceptance_draft_len=1,
    variants=(
        UpstreamVariant("baseline_mtp1", _DSV32_TEST),
        UpstreamVariant(
            "heuristic_topk_mtp1",
            dataclasses.replace(
                _DSV32_TEST, node="TestDeepSeekV32::test_fp8_blockscale[heuristic_topk_mtp1]"
            ),
            options=(("sparse_attention", {"enable_heuristic_topk": True}),),
            min_sm=BLACKWELL,
        ),
    ),
    index_share_axis=False,
    why=(
        "DeepSeek-V3.2-Exp-hf is the native FP8 checkpoint, about 690 GB of weights: it cannot "
        "load on 1 GPU and does not fit 4 x 141 GB with KV cache left over, so every upstream "
        "TestDeepSeekV32 id runs TP=8, EP=8 on >= 140 GB GPUs (skip_less_mpi_world_size(8), "
        "skip_less_device_memory(140000)); one 8 x H200 node is the smallest machine. DSA's "
        "DeepGEMM indexer kernels need Hopper or newer. On SM 100/103 (not SM120) upstream runs "
        "MoeConfig(backend='DEEPGEMM', max_num_tokens=16384) with free_gpu_memory_fraction=0.6; "
        "elsewhere MoeConfig() and 0.7; so does this case."
    ),
)

_GLM_TEST = UpstreamTest(
    "TestGLM52NVFP4::test_mtp_index_share",
    "tests/integration/defs/accuracy/test_glm52.py",
    "16d54ba2c616136458602ec3017880a6416fc692",
)

GLM52 = ModelCase(
    test_class="TestGLM52NVFP4",
    checkpoint="GLM-5.2-NVFP4",
    tensor_parallel_size=8,
    min_sm=BLACKWELL,
    min_memory_mib=None,
    options=(
        ("pipeline_parallel_size", 1),
        ("moe_expert_parallel_size", 8),
        ("moe_backend", "CUTEDSL"),
        ("max_seq_len", 8192),
        ("free_gpu_memory_fraction", 0.7),
        ("disable_overlap_scheduler", False),
        ("enable_chunked_prefill", True),
    ),
    sm100_options=(),
    cuda_graph=CudaGraphSpec(max_batch_size=128, enable_padding=True),
    mtp_spelling="max_draft_len",
    upstream=_GLM_TEST,
    acceptance_key="TestGLM52NVFP4::test_mtp_index_share",
    acceptance_draft_len=3,
    variants=(UpstreamVariant("mtp_index_share", _GLM_TEST),),
    index_share_axis=True,
    why=(
        "Upstream's TestGLM52NVFP4 runs GLM-5.2-NVFP4 at TP=8, EP=8 on the CuteDSL MoE backend "
        "with max_seq_len=8192, the overlap scheduler, chunked prefill and "
        "CudaGraphConfig(max_batch_size=128, enable_padding=True) (test_glm52.py, every id "
        "skip_less_mpi_world_size(8)); NVFP4 weights need Blackwell. The checkpoint sets "
        "index_share_for_mtp_iteration. The stale-map bug was first measured on the same "
        "checkpoint at TP=4 (AL 3.283 -> 3.766 at batch 8, K=4)."
    ),
)

MODELS: tuple[ModelCase, ...] = (DEEPSEEK_V32, GLM52)
