"""The TensorRT-LLM acceptance matrix: models, batch sizes, draft lengths, CUDA graphs on and off."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.trtllm.llm_config import LlmSpec, build_spec
from regress.trtllm.requirements import BLACKWELL, HOPPER, Needs

BATCH_SIZES: tuple[int, ...] = (1, 8, 32)
DRAFT_LENS: tuple[int, ...] = (1, 3, 4)
CUDA_GRAPH: tuple[bool, ...] = (False, True)
NUM_PROMPTS = 80
# Long enough for ~60 verify steps per request at AL ~ 4 (about 5,000 steps per run at K=4, enough
# for per-position rates to +-0.02 at 95%), short enough for 18 runs per model in a nightly stage.
MAX_NEW_TOKENS = 256
# Relative drop from batch 1 tolerated before a significant loss is a regression. Healthy runs
# differ by < 1% (GLM-5.2 K=4: 3.768 at batch 1, 3.766 at batch 8); the stale-map bug costs 13% AL
# and 29% conditional acceptance at depth 4, so 5% separates them with room on both sides.
TOLERANCE = 0.05


@dataclass(frozen=True)
class ModelCase:
    """One model of the matrix and how to run it, as upstream's own test of it runs it.

    Attributes:
        test_class: upstream's test class name (the prefix of our ``acceptance_length.yaml``
            keys and of the artifact directories).
        checkpoint: directory name under ``$LLM_MODELS_ROOT``.
        tensor_parallel_size: TP; the GPU count needed.
        moe_expert_parallel_size: EP, or None for TensorRT-LLM's default.
        min_sm: oldest architecture the checkpoint runs on.
        min_memory_mib: per-GPU memory floor, or None.
        options: ``LlmSpec`` fields upstream's test sets, on every architecture.
        blackwell_options: fields upstream sets on sm100+ only (override ``options``).
        upstream_test: the upstream test these settings were read from (path, commit, id).
        acceptance_key: upstream's ``acceptance_length.yaml`` key for this model's MTP test.
        acceptance_draft_len: the K that key was measured at; only cases at that K use it.
        why: why TP and architecture are what they are (shown in docs and reports).
    """

    test_class: str
    checkpoint: str
    tensor_parallel_size: int
    moe_expert_parallel_size: int | None
    min_sm: int
    min_memory_mib: int | None
    options: tuple[tuple[str, Any], ...]
    blackwell_options: tuple[tuple[str, Any], ...]
    upstream_test: str
    acceptance_key: str | None
    acceptance_draft_len: int | None
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
        """The ``LlmSpec`` fields for a GPU of compute capability ``sm`` (None: not known)."""
        chosen = dict(self.options)
        if sm is not None and sm >= BLACKWELL:
            chosen.update(self.blackwell_options)
        return chosen


DEEPSEEK_V32 = ModelCase(
    test_class="TestDeepSeekV32",
    checkpoint="DeepSeek-V3.2-Exp-hf",
    tensor_parallel_size=8,
    moe_expert_parallel_size=8,
    min_sm=HOPPER,
    min_memory_mib=140_000,
    options=(("free_gpu_memory_fraction", 0.7),),
    blackwell_options=(
        ("moe_backend", "DEEPGEMM"),
        ("moe_max_num_tokens", 16384),
        ("free_gpu_memory_fraction", 0.6),
    ),
    upstream_test=(
        "tests/integration/defs/accuracy/test_llm_api_pytorch.py::TestDeepSeekV32::"
        "test_fp8_blockscale[baseline_mtp1]; the Blackwell MoE settings are those of upstream "
        "commit c3ba00714b (PR #12823, 'Fix DeepSeekV32 test_fp8_blockscale[baseline_mtp1] OOM "
        "on Blackwell'), as read for issue 11"
    ),
    acceptance_key="TestDeepSeekV32::test_fp8_blockscale[baseline_mtp1]",
    acceptance_draft_len=1,
    why=(
        "DeepSeek-V3.2-Exp-hf is the native FP8 checkpoint, about 690 GB of weights: it cannot "
        "load on 1 GPU and does not fit 4 x 141 GB with KV cache left over, so every upstream "
        "TestDeepSeekV32 id runs TP=8, EP=8 on >= 140 GB GPUs (skip_less_mpi_world_size(8), "
        "skip_less_device_memory(140000)); one 8 x H200 node is the smallest machine. DSA's "
        "DeepGEMM indexer kernels need Hopper or newer. On Blackwell upstream runs "
        "MoeConfig(backend='DEEPGEMM', max_num_tokens=16384) with "
        "free_gpu_memory_fraction=0.6 (the OOM fix of PR #12823); so does this case."
    ),
)

GLM52 = ModelCase(
    test_class="TestGLM52NVFP4",
    checkpoint="GLM-5.2-NVFP4",
    tensor_parallel_size=8,
    moe_expert_parallel_size=8,
    min_sm=BLACKWELL,
    min_memory_mib=None,
    options=(
        ("moe_backend", "CUTEDSL"),
        ("max_seq_len", 8192),
        ("free_gpu_memory_fraction", 0.7),
    ),
    blackwell_options=(),
    upstream_test=(
        "tests/integration/defs/accuracy/test_glm52.py::TestGLM52NVFP4::test_mtp_index_share "
        "@ 29c0516aff38c6a2bfd1429d847db2b746e808be (tp_size=8, ep_size=8, "
        "MoeConfig(backend='CUTEDSL'), max_seq_len=8192, free_gpu_memory_fraction=0.7, "
        "MTPDecodingConfig(max_draft_len=3), skip_pre_blackwell, skip_less_mpi_world_size(8))"
    ),
    acceptance_key="TestGLM52NVFP4::test_mtp_index_share",
    acceptance_draft_len=3,
    why=(
        "Upstream's TestGLM52NVFP4 runs GLM-5.2-NVFP4 at TP=8, EP=8 on the CuteDSL MoE backend "
        "with max_seq_len=8192 (test_glm52.py, every id skip_less_mpi_world_size(8)); NVFP4 "
        "weights need Blackwell. The stale-map bug was first measured on the same checkpoint "
        "at TP=4 (AL 3.283 -> 3.766 at batch 8, K=4)."
    ),
)

MODELS: tuple[ModelCase, ...] = (DEEPSEEK_V32, GLM52)


@dataclass(frozen=True)
class Case:
    """One cell of the matrix: a model at one batch size, draft length and CUDA-graph setting."""

    model: ModelCase
    batch_size: int
    max_draft_len: int
    cuda_graph: bool

    @property
    def id(self) -> str:
        """Test id: ``b8-k4-graph`` / ``b8-k4-eager``."""
        graph = "graph" if self.cuda_graph else "eager"
        return f"b{self.batch_size}-k{self.max_draft_len}-{graph}"

    @property
    def series(self) -> tuple[str, int, bool]:
        """Cases that share a batch-1 reference: same model, K and graph setting."""
        return (self.model.test_class, self.max_draft_len, self.cuda_graph)

    @property
    def reference(self) -> Case:
        """The batch-1 case this one is judged against."""
        return Case(self.model, 1, self.max_draft_len, self.cuda_graph)

    def reference_keys(self, test_name: str = "test_acceptance") -> tuple[str, ...]:
        """``acceptance_length.yaml`` keys for this case's ``min_al``, most specific first.

        At the K upstream's own MTP test runs (``ModelCase.acceptance_draft_len``), upstream's
        key comes first, so pointing the gate at upstream's real ``acceptance_length.yaml``
        gates those cases by upstream's reference. Then regress's own keys: AL does not depend
        on the batch size when nothing is broken, so they name K and the graph setting
        (``TestGLM52NVFP4::test_acceptance[k4-eager]``), then K alone.
        """
        graph = "graph" if self.cuda_graph else "eager"
        base = f"{self.model.test_class}::{test_name}"
        own = (f"{base}[k{self.max_draft_len}-{graph}]", f"{base}[k{self.max_draft_len}]")
        upstream = self.model.acceptance_key
        if upstream is not None and self.max_draft_len == self.model.acceptance_draft_len:
            return (upstream, *own)
        return own

    def spec(self, model_dir: Path | str, *, sm: int | None = None, **options: Any) -> LlmSpec:
        """The ``LLM`` spec for this case with the checkpoint at ``model_dir``."""
        defaults: dict[str, Any] = {
            "moe_expert_parallel_size": self.model.moe_expert_parallel_size,
            **self.model.spec_options(sm),
        }
        defaults.update(options)
        return build_spec(
            str(model_dir),
            batch_size=self.batch_size,
            max_draft_len=self.max_draft_len,
            cuda_graph=self.cuda_graph,
            tensor_parallel_size=self.model.tensor_parallel_size,
            **defaults,
        )


def cases(
    model: ModelCase,
    *,
    batch_sizes: tuple[int, ...] = BATCH_SIZES,
    draft_lens: tuple[int, ...] = DRAFT_LENS,
    cuda_graph: tuple[bool, ...] = CUDA_GRAPH,
) -> Iterator[Case]:
    """Every case of one model, grouped so cases sharing a batch-1 reference are adjacent."""
    for graph, k, b in itertools.product(cuda_graph, draft_lens, batch_sizes):
        yield Case(model, b, k, graph)
