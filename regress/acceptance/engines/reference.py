"""Adapter from the profiler to regress's CPU reference engine (``regress.reference.engine``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from regress.acceptance.engines import EngineProgress, Prompt
from regress.acceptance.trace import RequestTrace
from regress.errors import EngineError, RegressError, UsageError


class ReferenceAcceptanceEngine:
    """Drives ``regress.reference.engine.ReferenceEngine``: a tiny DSA model with MTP-Eagle drafts.

    The reference engine replays upstream defects on demand (``defects=["stale_req_idx"]``), which
    is what makes the profiler's verdicts testable without a GPU.

    Args:
        device: ``"cpu"`` or ``"cuda"``.
        defects: defect names to switch on (an empty list means none, whatever the environment).
        cuda_graph: passed through; the reference engine may ignore it on CPU.
        seed: the engine's weight seed.
        sentinel: run the DSA runtime sentinel; its findings land in the report.
        model: refused: the reference engine has one built-in model.
        engine_factory: builds the engine from the keyword options (tests inject fakes here).
    """

    name = "reference"

    def __init__(
        self,
        *,
        device: str = "cpu",
        defects: Iterable[str] | None = None,
        cuda_graph: bool | None = None,
        seed: int = 0,
        sentinel: bool = False,
        model: str | None = None,
        engine_factory: Callable[..., Any] | None = None,
    ) -> None:
        if model:
            raise UsageError(
                "the reference engine has its own built-in model; drop --model, or use --engine trtllm"
            )
        if device not in ("cpu", "cuda"):
            raise UsageError(f"--device must be cpu or cuda, got {device!r}")
        self.options = {
            "device": device,
            "defects": sorted(defects) if defects is not None else None,
            "cuda_graph": cuda_graph,
            "seed": seed,
            "sentinel": sentinel,
        }
        if engine_factory is None:
            # Imported here, not at module load: it imports torch, and `regress --help` and the
            # pure statistics stay free of it.
            from regress.reference.engine import ReferenceEngine

            engine_factory = ReferenceEngine
        try:
            self._engine = engine_factory(
                device=device, defects=defects, cuda_graph=cuda_graph, seed=seed, sentinel=sentinel
            )
        except RegressError:
            raise
        except Exception as exc:
            raise EngineError(f"the reference engine failed to start on {device}: {exc}") from exc
        # Record what the engine resolved (REGRESS_DEFECTS, the CUDA-graph default), not just
        # what was asked, so a report says which defects were really live.
        live = getattr(self._engine, "defects", None)
        if live is not None:
            self.options["defects"] = sorted(live)
        self.options["cuda_graph"] = getattr(self._engine, "cuda_graph", cuda_graph)
        self.model = str(getattr(self._engine, "model_name", "reference"))
        self.last_counters: dict[str, int] | None = None
        self.last_notes: list[str] = []
        self.last_wall_seconds: float | None = None
        self._violations: list[dict] = []
        self._engine_list: list | None = getattr(self._engine, "sentinel_violations", None)
        self._engine_seen = len(self._engine_list or [])

    @property
    def sentinel_violations(self) -> list[dict] | None:
        """Sentinel findings of every run so far, in order; None when the sentinel is off."""
        if not self.options["sentinel"]:
            return None
        return list(self._violations)

    def _collect_violations(self) -> None:
        # The engine may hand back a fresh list per generate() or keep appending to one; either
        # way only what this run added is new, and the profiler reads our cumulative list.
        current = getattr(self._engine, "sentinel_violations", None) or []
        if current is self._engine_list and len(current) >= self._engine_seen:
            new = current[self._engine_seen :]
        else:
            new = current
        self._violations.extend(dict(v) for v in new)
        self._engine_list, self._engine_seen = current, len(current)

    def default_prompts(self, limit: int | None = None) -> list[Prompt]:
        """The reference engine's 80 built-in prompts (the first ``limit``), as token ids."""
        from regress.reference.prompts import load_prompts

        return list(load_prompts(limit=limit))

    def tokenize(self, text: str) -> list[int]:
        """Token ids of a text prompt, by the reference model's byte-level tokenizer."""
        from regress.reference.prompts import encode

        try:
            return list(encode(text))
        except UnicodeEncodeError as exc:
            raise UsageError(
                f"a text prompt is not encodable as UTF-8 ({exc.reason} at {exc.start}); "
                "fix that prompt in --prompts"
            ) from exc

    def run(
        self,
        prompts: Sequence[Prompt],
        *,
        batch_size: int,
        max_draft_len: int,
        max_new_tokens: int,
        progress: EngineProgress | None = None,
    ) -> list[RequestTrace]:
        """Generate every prompt, ``batch_size`` requests in flight; one trace per prompt, in order."""
        token_prompts = [self.tokenize(p) if isinstance(p, str) else list(p) for p in prompts]
        result = self._engine.generate(
            token_prompts,
            batch_size=batch_size,
            max_draft_len=max_draft_len,
            max_new_tokens=max_new_tokens,
            progress=progress,
        )
        counters = getattr(result, "counters", None)
        self.last_counters = dict(counters) if counters else None
        self.last_wall_seconds = getattr(result, "wall_seconds", None)
        self.last_notes = []
        if self.options["sentinel"]:
            self._collect_violations()
        traces = [
            RequestTrace(
                accepted=[int(a) for a in r.accepted],
                tokens=list(r.tokens) if getattr(r, "tokens", None) is not None else None,
                prompt_index=getattr(r, "prompt_index", n),
            )
            for n, r in enumerate(result.requests)
        ]
        traces.sort(key=lambda t: t.prompt_index if t.prompt_index is not None else -1)
        return traces
