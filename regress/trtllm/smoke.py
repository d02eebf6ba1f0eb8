"""A checkpoint-free TensorRT-LLM run: tiny config, random weights, token-id prompts."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from regress.errors import MissingDependencyError
from regress.trtllm.llm_config import LlmSpec, to_llm_kwargs


def dummy_prompts(
    count: int, vocab_size: int, *, seed: int = 0, min_len: int = 8, max_len: int = 96
) -> list[list[int]]:
    """Random token-id prompts of varied lengths (a tokenizer-free checkpoint needs ids).

    Lengths vary so that context batches mix request sizes: a uniform layout would let a stale
    token-to-request map look right by accident more often. Token 0 and 1 (BOS/EOS in the tiny
    config) are avoided.
    """
    rng = random.Random(seed)
    return [
        [rng.randrange(2, vocab_size) for _ in range(rng.randint(min_len, max_len))]
        for _ in range(count)
    ]


@dataclass(frozen=True)
class SmokeResult:
    """What a smoke run produced: how many requests finished and their output lengths."""

    requests: int
    output_lengths: list[int]


def _tensorrt_llm() -> Any:
    try:
        import tensorrt_llm
    except ImportError as exc:
        raise MissingDependencyError(
            f"The dummy-weights run needs tensorrt_llm ({exc}); run it where TensorRT-LLM is "
            "installed."
        ) from exc
    return tensorrt_llm


def run_smoke(
    spec: LlmSpec,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    llm_factory: Callable[..., Any] | None = None,
    sampling_factory: Callable[..., Any] | None = None,
    llmapi: Any = None,
) -> SmokeResult:
    """Build the ``LLM``, generate every prompt greedily to ``max_new_tokens``, shut down.

    With random weights acceptance means nothing; the run exists so the sentinel can watch the
    DSA metadata go through real draft loops at batch > 1. ``end_id=-1`` keeps every request
    going to ``max_new_tokens`` (the tiny checkpoint has no tokenizer to supply an EOS), so every
    request passes through the same number of draft steps.

    Args:
        spec: the spec (``load_format="dummy"``, ``skip_tokenizer_init=True`` for the tiny config).
        prompts: token-id prompts.
        max_new_tokens: output budget per request.
        llm_factory: ``tensorrt_llm.LLM`` by default; tests pass a fake.
        sampling_factory: ``tensorrt_llm.SamplingParams`` by default.
        llmapi: config namespace for :func:`to_llm_kwargs` (tests pass a fake).
    """
    if llm_factory is None or sampling_factory is None:
        trt = _tensorrt_llm()
        llm_factory = llm_factory or trt.LLM
        sampling_factory = sampling_factory or trt.SamplingParams
    sampling = sampling_factory(max_tokens=max_new_tokens, end_id=-1, pad_id=-1, detokenize=False)
    llm = llm_factory(**to_llm_kwargs(spec, llmapi))
    try:
        outputs = llm.generate([list(p) for p in prompts], sampling_params=sampling)
    finally:
        shutdown = getattr(llm, "shutdown", None)
        if shutdown is not None:
            shutdown()
    lengths = [len(o.outputs[0].token_ids) for o in outputs]
    return SmokeResult(requests=len(outputs), output_lengths=lengths)
