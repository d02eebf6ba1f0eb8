"""Every ``LLM`` configuration ``tests/integration`` builds, by test id, as plain data.

The GPU tests take a node of 8 GPUs for hours; a field upstream renamed, removed or now validates
differently would only show once the node is booked. Listing every spec they build here, from the
same functions their parametrizations call (:data:`MATRIX_TESTS`, :func:`dummy_spec`), lets
``regress check``'s ``llm_configs`` scenario build each one against a tree's own
``tensorrt_llm/llmapi/llm_args.py`` on a CPU first. Nothing here knows how that tree is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from regress.trtllm.cases import (
    MODELS,
    Case,
    ModelCase,
    cases,
    index_share_cases,
    kv_manager_cases,
    pool_fill_cases,
)
from regress.trtllm.llm_config import LlmSpec, build_spec
from regress.trtllm.requirements import BLACKWELL, HOPPER

#: The matrix tests of ``tests/integration/test_dsa_mtp_acceptance.py`` and the cases each runs,
#: per model; the test file parametrizes from :func:`matrix_cases`, so this table is the one place.
MATRIX_TESTS: dict[str, Callable[[ModelCase], Iterable[Case]]] = {
    "test_acceptance": cases,
    "test_kv_cache_manager": kv_manager_cases,
    "test_index_share": index_share_cases,
    "test_indexer_pool_fill": pool_fill_cases,
}
#: The GPU architectures the specs are built for: a case's fields depend on the SM (upstream's
#: DeepSeek-V3.2 test switches the MoE backend on SM 100/103), H200 is 90, B200 100.
ARCHITECTURES: tuple[int, ...] = (HOPPER, BLACKWELL)
#: ``tests/integration/test_trtllm_dummy.py``: the checkpoint-free run (tiny config, batch 8, K=4).
DUMMY_TEST = "test_trtllm_dummy.py::test_dummy_weights_sentinel_sees_no_violation"
DUMMY_BATCH_SIZE = 8
DUMMY_DRAFT_LEN = 4


def matrix_cases(model: ModelCase, test: str) -> list[Case]:
    """The cases ``test`` (a key of :data:`MATRIX_TESTS`) runs for ``model``."""
    return list(MATRIX_TESTS[test](model))


def dummy_spec(model_dir: Path | str, *, cuda_graph: bool) -> LlmSpec:
    """The spec of the checkpoint-free run: dummy weights, token-id prompts, one GPU."""
    return build_spec(
        str(model_dir),
        batch_size=DUMMY_BATCH_SIZE,
        max_draft_len=DUMMY_DRAFT_LEN,
        cuda_graph=cuda_graph,
        load_format="dummy",
        skip_tokenizer_init=True,
        max_seq_len=512,
        free_gpu_memory_fraction=0.3,
    )


@dataclass(frozen=True)
class BuiltSpec:
    """One ``LLM`` configuration an integration test builds.

    Attributes:
        test_id: the test and its parameters, and the SM the spec was built for
            (``TestGLM52NVFP4::test_index_share[b8-k3-graph-share]@sm100``).
        spec: what the test passes to ``LLM``.
    """

    test_id: str
    spec: LlmSpec


def integration_specs(model_root: Path | str) -> Iterator[BuiltSpec]:
    """Every spec ``tests/integration`` builds, checkpoints under ``model_root``.

    Each model at each of :data:`ARCHITECTURES` it runs on (``ModelCase.min_sm``): every case of
    every matrix test, then every upstream variant (``test_upstream_config``, each at its own
    architecture floor); then the checkpoint-free run, eager and with CUDA graphs.
    """
    root = Path(model_root)
    for model in MODELS:
        model_dir = root / model.checkpoint
        for sm in (sm for sm in ARCHITECTURES if sm >= model.min_sm):
            at = f"@sm{sm}"
            for test in MATRIX_TESTS:
                for case in matrix_cases(model, test):
                    spec = case.spec(model_dir, sm=sm)
                    yield BuiltSpec(f"{model.test_class}::{test}[{case.id}]{at}", spec)
            for variant in model.variants:
                if variant.min_sm is None or sm >= variant.min_sm:
                    spec = model.upstream_spec(model_dir, sm=sm, variant=variant.name)
                    test_id = f"{model.test_class}::test_upstream_config[{variant.name}]{at}"
                    yield BuiltSpec(test_id, spec)
    for graph in (False, True):
        spec = dummy_spec(root / "tiny-deepseek-v32", cuda_graph=graph)
        yield BuiltSpec(f"{DUMMY_TEST}[{'graph' if graph else 'eager'}]", spec)
