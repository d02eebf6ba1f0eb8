"""The acceptance engine ``trtllm``: the profiler driving TensorRT-LLM's LLM API (one-model MTP-Eagle).

:data:`TRTLLM` is its registry entry, declared in regress's ``pyproject.toml`` under the
``regress.engines`` entry-point group, so the profiler (which knows nothing of TensorRT-LLM) builds
it by name.

Per-step acceptance comes from streaming deltas (see :mod:`.streaming`), cross-checked against
``request_perf_metrics.speculative_decoding`` and, when iteration stats are on, ``get_stats()``.
``tensorrt_llm`` is imported only when this engine is built.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from regress.acceptance.engines import EngineProgress, Prompt
from regress.acceptance.engines.streaming import account_stream, cross_check, deltas_from_lengths
from regress.acceptance.trace import RequestTrace
from regress.errors import EngineError, RegressError, UsageError, require_module
from regress.install import install_hint
from regress.plugins import Plugin
from regress.trtllm.llm_config import build_mtp_config, graph_batch_sizes

INSTALL = f"{install_hint('trtllm')}, on a machine with CUDA"


@dataclass
class _Streamed:
    """What one request's stream left behind."""

    lengths: list[int]
    token_ids: list[int]
    finish_reason: str | None
    perf: dict[str, int] | None


def _perf_metrics(*holders: Any) -> dict[str, int] | None:
    """``request_perf_metrics.speculative_decoding`` as a dict, from whichever object carries it."""
    for holder in holders:
        metrics = getattr(holder, "request_perf_metrics", None)
        spec = getattr(metrics, "speculative_decoding", None)
        if spec is not None:
            return {
                "total_accepted_draft_tokens": int(spec.total_accepted_draft_tokens),
                "total_draft_tokens": int(spec.total_draft_tokens),
            }
    return None


def iteration_counters(stats: Iterable[Any]) -> tuple[dict[str, int] | None, int]:
    """Sum upstream's per-iteration ``specDecodingStats`` and find the largest scheduled batch.

    Mirrors ``compute_acceptance_length`` in upstream's
    ``tests/integration/defs/accuracy/accuracy_core.py`` (newest stored version, commit unknown) (the ``inflightBatchingStats`` key as read by ``test_glm52.py`` @ 29c0516a): only
    iterations with ``numDraftTokens > 0`` count. ``get_stats()`` returns dicts or JSON strings
    by version.

    Returns:
        (counters or None when no iteration had drafts, max ``numScheduledRequests`` seen)
    """
    totals = {"num_draft_tokens": 0, "num_accepted_tokens": 0, "num_requests_with_draft_tokens": 0}
    seen = False
    max_scheduled = 0
    for stat in stats:
        if isinstance(stat, str):
            stat = json.loads(stat)
        ifb = stat.get("inflightBatchingStats") or {}
        max_scheduled = max(max_scheduled, int(ifb.get("numScheduledRequests", 0) or 0))
        spec = stat.get("specDecodingStats") or {}
        if int(spec.get("numDraftTokens", 0) or 0) <= 0:
            continue
        seen = True
        totals["num_draft_tokens"] += int(spec["numDraftTokens"])
        totals["num_accepted_tokens"] += int(spec.get("numAcceptedTokens", 0))
        totals["num_requests_with_draft_tokens"] += int(spec.get("numRequestsWithDraftTokens", 0))
    return (totals if seen else None), max_scheduled


STATS_POLL_SECONDS = 1.0
"""How often iteration stats are drained during a run. TensorRT-LLM keeps only the newest
``max_stats_len`` entries (default 1000) and drops older ones, so a run longer than 1000
iterations read once at the end would lose its first iterations' ``specDecodingStats``.
(``TorchLlmArgs.max_stats_len``, default 1000, in ``llmapi/llm_args.py`` @ 00043967.)"""
STATS_TIMEOUT_SECONDS = 0.5


def _drain_stats(llm: Any, timeout: float) -> list[Any]:
    """One ``llm.get_stats(timeout)`` call: it returns (and removes) what the executor holds."""
    return list(llm.get_stats(timeout=timeout) or [])


async def _poll_stats(llm: Any, sink: list[Any], stop: asyncio.Event, interval: float) -> None:
    """Drain iteration stats into ``sink`` every ``interval`` seconds until ``stop`` is set."""
    while not stop.is_set():
        sink.extend(await asyncio.to_thread(_drain_stats, llm, STATS_TIMEOUT_SECONDS))
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            continue


async def _stream_all(
    llm: Any,
    prompts: Sequence[Prompt],
    sampling: Any,
    batch_size: int,
    progress: EngineProgress | None,
    stats: list[Any] | None = None,
    poll_seconds: float = STATS_POLL_SECONDS,
) -> list[_Streamed]:
    """Stream every prompt, keeping exactly ``batch_size`` requests in flight until the tail.

    A new request is submitted the moment one finishes, so the scheduler (capped by
    ``max_batch_size``) sees the requested batch size for the whole run, not just per wave.
    With ``stats`` given, iteration stats are drained into it during the run (every
    ``poll_seconds``) and once more after the last request, so none is lost to
    ``max_stats_len``.
    """
    stop = asyncio.Event()
    poller = (
        asyncio.create_task(_poll_stats(llm, stats, stop, poll_seconds))
        if stats is not None
        else None
    )
    try:
        return await _stream_requests(llm, prompts, sampling, batch_size, progress)
    finally:
        if poller is not None:
            stop.set()
            await poller
            stats.extend(await asyncio.to_thread(_drain_stats, llm, 2.0))


async def _stream_requests(
    llm: Any,
    prompts: Sequence[Prompt],
    sampling: Any,
    batch_size: int,
    progress: EngineProgress | None,
) -> list[_Streamed]:
    """The requests of :func:`_stream_all`, ``batch_size`` in flight."""
    gate = asyncio.Semaphore(batch_size)
    results: list[_Streamed | None] = [None] * len(prompts)
    done = 0

    async def one(index: int, prompt: Prompt) -> None:
        nonlocal done
        async with gate:
            lengths: list[int] = []
            last = None
            request = prompt if isinstance(prompt, str) else list(prompt)
            async for last in llm.generate_async(request, sampling_params=sampling, streaming=True):
                lengths.append(len(last.outputs[0].token_ids))
            if last is None:
                raise EngineError(f"TensorRT-LLM streamed no response for prompt {index}")
            output = last.outputs[0]
            results[index] = _Streamed(
                lengths, list(output.token_ids), output.finish_reason, _perf_metrics(output, last)
            )
        done += 1
        if progress is not None:
            progress(done, len(prompts))

    await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    return [r for r in results if r is not None]


class TrtllmAcceptanceEngine:
    """Profiles a real checkpoint with TensorRT-LLM's one-model MTP-Eagle speculative decoding.

    One ``LLM`` is built per run because ``max_batch_size`` must equal the batch size under test
    (a larger engine would be free to batch differently). Sampling is greedy, so acceptance is a
    property of the model and the engine, not of the random draws.

    Args:
        model: checkpoint directory (a Hugging Face model with MTP layers, e.g. DeepSeek-V3.2).
        device: must be ``"cuda"``.
        cuda_graph: True captures CUDA graphs, False disables them, None keeps TensorRT-LLM's default.
        tensor_parallel_size: GPUs per model.
        kv_cache_fraction: ``KvCacheConfig(free_gpu_memory_fraction=...)``, if set.
        iter_stats: turn on ``enable_iter_perf_stats`` for the ``get_stats()`` cross-check.
        ignore_eos: generate to ``max_new_tokens`` regardless of EOS (more steps per prompt).
        llm_kwargs: further ``LLM(...)`` keyword arguments.
        defects, sentinel, seed: reference-engine options; defects and the sentinel are refused.
    """

    name = "trtllm"

    def __init__(
        self,
        *,
        model: str | None = None,
        device: str = "cuda",
        cuda_graph: bool | None = None,
        tensor_parallel_size: int = 1,
        kv_cache_fraction: float | None = None,
        iter_stats: bool = True,
        ignore_eos: bool = False,
        llm_kwargs: dict | None = None,
        defects: Iterable[str] | None = None,
        sentinel: bool = False,
        seed: int = 0,
    ) -> None:
        if not model:
            raise UsageError(
                "--engine trtllm needs --model PATH: a checkpoint directory with MTP layers"
            )
        if device != "cuda":
            raise UsageError(
                "--engine trtllm runs on CUDA only; drop --device or pass --device cuda"
            )
        if defects:
            raise UsageError(
                "--defect replays a historical bug in the reference engine only; to test a "
                "TensorRT-LLM build with a bug, install that build (see `regress bisect`)"
            )
        if sentinel:
            raise UsageError("--sentinel instruments the reference engine only")
        self.model = str(model)
        self.cuda_graph = cuda_graph
        self.tensor_parallel_size = tensor_parallel_size
        self.kv_cache_fraction = kv_cache_fraction
        self.iter_stats = iter_stats
        self.ignore_eos = ignore_eos
        self.llm_kwargs = dict(llm_kwargs or {})
        self.options = {
            "model": self.model,
            "device": device,
            "cuda_graph": cuda_graph,
            "tensor_parallel_size": tensor_parallel_size,
            "kv_cache_fraction": kv_cache_fraction,
            "iter_stats": iter_stats,
            "ignore_eos": ignore_eos,
            "seed": seed,
        }
        self.last_counters: dict[str, int] | None = None
        self.last_notes: list[str] = []
        self.sentinel_violations = None
        # Fail now, before any prompt is read, when the dependency is missing (exit 3).
        self._trt = require_module("tensorrt_llm", purpose="--engine trtllm", install=INSTALL)
        self.options["tensorrt_llm_version"] = getattr(self._trt, "__version__", None)

    def default_prompts(self, limit: int | None = None) -> list[Prompt]:
        raise UsageError(
            '--engine trtllm needs --prompts FILE.jsonl (lines of {"prompt": "..."} or '
            '{"token_ids": [...]}); the reference prompts are synthetic token ids'
        )

    def _build_llm(self, batch_size: int, max_draft_len: int) -> Any:
        llmapi = importlib.import_module("tensorrt_llm.llmapi")
        # The spelling each release honours, and a check that the built config runs K.
        spec = build_mtp_config(llmapi, max_draft_len, one_model=True)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "speculative_config": spec,
            "max_batch_size": batch_size,
            "tensor_parallel_size": self.tensor_parallel_size,
            "enable_iter_perf_stats": self.iter_stats,
        }
        if self.cuda_graph is True:
            kwargs["cuda_graph_config"] = llmapi.CudaGraphConfig(
                batch_sizes=list(graph_batch_sizes(batch_size)), enable_padding=True
            )
        elif self.cuda_graph is False:
            kwargs["cuda_graph_config"] = None
        if self.kv_cache_fraction is not None:
            kwargs["kv_cache_config"] = llmapi.KvCacheConfig(
                free_gpu_memory_fraction=self.kv_cache_fraction
            )
        kwargs.update(self.llm_kwargs)
        return self._trt.LLM(**kwargs)

    def _sampling_params(self, max_new_tokens: int) -> Any:
        base = {"max_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": self.ignore_eos}
        try:
            return self._trt.SamplingParams(**base, return_perf_metrics=True)
        except TypeError:  # releases before per-request perf metrics
            return self._trt.SamplingParams(**base)

    def run(
        self,
        prompts: Sequence[Prompt],
        *,
        batch_size: int,
        max_draft_len: int,
        max_new_tokens: int,
        progress: EngineProgress | None = None,
    ) -> list[RequestTrace]:
        """Build an engine for this batch size, stream every prompt, account for every step."""
        try:
            llm = self._build_llm(batch_size, max_draft_len)
        except RegressError:
            raise
        except Exception as exc:
            raise EngineError(
                f"TensorRT-LLM could not build an engine for {self.model} at batch {batch_size}, "
                f"K={max_draft_len}: {exc}"
            ) from exc
        stats: list[Any] = []
        try:
            streamed = asyncio.run(
                _stream_all(
                    llm,
                    prompts,
                    self._sampling_params(max_new_tokens),
                    batch_size,
                    progress,
                    stats=stats if self.iter_stats else None,
                )
            )
        except RegressError:
            raise
        except Exception as exc:
            raise EngineError(
                f"TensorRT-LLM failed while generating at batch {batch_size}: {exc}"
            ) from exc
        finally:
            _shutdown(llm)
        return self._account(streamed, stats, batch_size=batch_size, max_draft_len=max_draft_len)

    def _account(
        self,
        streamed: list[_Streamed],
        stats: Iterable[Any],
        *,
        batch_size: int,
        max_draft_len: int,
    ) -> list[RequestTrace]:
        accounts = [
            account_stream(
                deltas_from_lengths(s.lengths),
                max_draft_len=max_draft_len,
                finish_reason=s.finish_reason,
            )
            for s in streamed
        ]
        counters, max_scheduled = iteration_counters(stats)
        self.last_counters = counters
        perf = [s.perf for s in streamed]
        notes = cross_check(
            accounts,
            max_draft_len=max_draft_len,
            perf=perf if any(p is not None for p in perf) else None,
            counters=counters,
        )
        target = min(batch_size, len(streamed))
        if self.iter_stats and stats and max_scheduled < target:
            notes.append(
                f"batch size {batch_size} was not reached: at most {max_scheduled} requests were "
                "scheduled in one iteration (KV-cache capacity? raise kv_cache_fraction)"
            )
        self.last_notes = notes
        return [
            account.to_trace(prompt_index=i, tokens=s.token_ids)
            for i, (account, s) in enumerate(zip(accounts, streamed, strict=True))
        ]


def _shutdown(llm: Any) -> None:
    shutdown: Callable[[], None] | None = getattr(llm, "shutdown", None)
    if shutdown is not None:
        shutdown()


#: ``--engine trtllm`` (entry point ``regress.engines``: ``trtllm``).
TRTLLM = Plugin(
    "trtllm", "a real checkpoint (--model) through TensorRT-LLM", TrtllmAcceptanceEngine
)
