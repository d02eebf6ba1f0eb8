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
    """One model of the matrix and how to run it.

    Attributes:
        test_class: the test class name (also the ``acceptance_length.yaml`` key prefix).
        checkpoint: directory name under ``$LLM_MODELS_ROOT``.
        tensor_parallel_size: TP; the GPU count needed.
        moe_expert_parallel_size: EP, or None for TensorRT-LLM's default.
        min_sm: oldest architecture the checkpoint runs on.
        min_memory_mib: per-GPU memory floor, or None.
        moe_backend: ``MoeConfig(backend=...)`` on Hopper-class GPUs, or None for the default.
        moe_backend_blackwell: the same on sm100+, or None for the default.
        why: why TP and architecture are what they are (shown in docs and reports).
    """

    test_class: str
    checkpoint: str
    tensor_parallel_size: int
    moe_expert_parallel_size: int | None
    min_sm: int
    min_memory_mib: int | None
    moe_backend: str | None
    moe_backend_blackwell: str | None
    why: str

    @property
    def needs(self) -> Needs:
        return Needs(
            checkpoint=self.checkpoint,
            gpus=self.tensor_parallel_size,
            min_sm=self.min_sm,
            min_memory_mib=self.min_memory_mib,
        )

    def moe_backend_for(self, sm: int | None) -> str | None:
        if sm is not None and sm >= BLACKWELL and self.moe_backend_blackwell is not None:
            return self.moe_backend_blackwell
        return self.moe_backend


DEEPSEEK_V32 = ModelCase(
    test_class="TestDeepSeekV32",
    checkpoint="DeepSeek-V3.2-Exp-hf",
    tensor_parallel_size=8,
    moe_expert_parallel_size=8,
    min_sm=HOPPER,
    min_memory_mib=140_000,
    moe_backend=None,
    moe_backend_blackwell="DEEPGEMM",
    why=(
        "DeepSeek-V3.2-Exp-hf is the native FP8 checkpoint, about 690 GB of weights: it cannot "
        "load on 1 GPU and does not fit 4 x 141 GB with KV cache left over, so every upstream "
        "TestDeepSeekV32 id runs TP=8, EP=8 on >= 140 GB GPUs (skip_less_mpi_world_size(8), "
        "skip_less_device_memory(140000)); one 8 x H200 node is the smallest machine. DSA's "
        "DeepGEMM indexer kernels need Hopper or newer. On Blackwell upstream picks the DEEPGEMM "
        "MoE backend for this checkpoint, so does this case."
    ),
)

GLM52 = ModelCase(
    test_class="TestGLM52",
    checkpoint="GLM-5.2-NVFP4",
    tensor_parallel_size=4,
    moe_expert_parallel_size=None,
    min_sm=BLACKWELL,
    min_memory_mib=None,
    moe_backend=None,
    moe_backend_blackwell=None,
    why=(
        "The configuration the stale-map bug was measured on (GLM-5.2-NVFP4, TP=4, 80 prompts, "
        "greedy, K=4: AL 3.283 -> 3.766 at batch 8); NVFP4 weights need Blackwell."
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

        AL does not depend on the batch size when nothing is broken, so entries are keyed by K
        and the graph setting (``TestGLM52::test_acceptance[k4-eager]``), then by K alone.
        """
        graph = "graph" if self.cuda_graph else "eager"
        base = f"{self.model.test_class}::{test_name}"
        return (f"{base}[k{self.max_draft_len}-{graph}]", f"{base}[k{self.max_draft_len}]")

    def spec(self, model_dir: Path | str, *, sm: int | None = None, **options: Any) -> LlmSpec:
        """The ``LLM`` spec for this case with the checkpoint at ``model_dir``."""
        defaults: dict[str, Any] = {
            "moe_expert_parallel_size": self.model.moe_expert_parallel_size,
            "moe_backend": self.model.moe_backend_for(sm),
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
