"""One TensorRT-LLM acceptance run per matrix case, with the sentinel attached, memoised per session."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.acceptance.engines import Prompt
from regress.acceptance.prompts import parse_prompt_line
from regress.acceptance.stats import RunStats, summarize
from regress.acceptance.trace import validate_traces
from regress.errors import UsageError
from regress.trtllm.cases import Case
from regress.trtllm.hooks import HookConfig, SentinelReport, read_report, sentinel_session
from regress.trtllm.llm_config import LlmSpec, to_llm_kwargs


def acceptance_engine(spec: LlmSpec, *, llmapi: Any = None, engine_cls: Any = None) -> Any:
    """The acceptance package's TensorRT-LLM engine, configured from ``spec``.

    The engine builds its own ``LLM`` per run; passing the spec's full keyword arguments as
    ``llm_kwargs`` makes the spec the single record of what ran (the engine's defaults for the
    same keys are overridden, its options still describe the run in the report).
    """
    if engine_cls is None:
        from regress.trtllm.engine import TrtllmAcceptanceEngine as engine_cls
    llm_kwargs = to_llm_kwargs(spec, llmapi)
    llm_kwargs.pop("model")
    return engine_cls(
        model=spec.model,
        cuda_graph=spec.cuda_graph,
        tensor_parallel_size=spec.tensor_parallel_size,
        kv_cache_fraction=spec.free_gpu_memory_fraction,
        iter_stats=spec.enable_iter_perf_stats,
        llm_kwargs=llm_kwargs,
    )


@dataclass
class CaseRun:
    """What one case's run produced.

    Attributes:
        case: the matrix cell.
        spec: the ``LLM`` spec it ran with.
        stats: acceptance statistics (AL, per-position, conditional, CIs).
        sentinel: what the DSA sentinel recorded in every process.
        notes: the engine's remarks (stream cross-check mismatches, batch size not reached).
        wall_seconds: engine build plus generation time.
    """

    case: Case
    spec: LlmSpec
    stats: RunStats
    sentinel: SentinelReport
    notes: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record of the run: what ran (spec), what it measured, what was seen."""
        return {
            "test_class": self.case.model.test_class,
            "case": self.case.id,
            "spec": self.spec.to_dict(),
            "stats": self.stats.to_dict(),
            "sentinel": {
                "attached": len(self.sentinel.attached),
                "violations": self.sentinel.violations,
                "errors": self.sentinel.errors,
            },
            "notes": list(self.notes),
            "wall_seconds": round(self.wall_seconds, 3),
        }

    def save(self, directory: Path | str) -> Path:
        """Write ``<directory>/<TestClass>/<case id>.json`` and return its path."""
        path = Path(directory) / self.case.model.test_class / f"{self.case.id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, default=str) + "\n", encoding="utf-8")
        return path


def run_case(
    case: Case,
    spec: LlmSpec,
    prompts: Sequence[Prompt],
    *,
    max_new_tokens: int,
    hook: HookConfig,
    engine_factory: Callable[[LlmSpec], Any] = acceptance_engine,
    mpi_session_module: Any = None,
    sentinel_factory: Callable[[], Any] | None = None,
) -> CaseRun:
    """Run one case with the sentinel hooked into this process and the MPI workers.

    Args:
        case: the matrix cell (batch size and K come from here).
        spec: its ``LLM`` spec (``case.spec(model_dir)``).
        prompts: the prompts, the same for every case of a series.
        max_new_tokens: output budget per request.
        hook: where the sentinel records; give each run its own ``sink_dir``.
        engine_factory: builds the engine from the spec (tests pass a fake).
        mpi_session_module: ``tensorrt_llm.llmapi.mpi_session`` to reach MPI workers, or None.
        sentinel_factory: sentinel factory for this process (default: ``hook.sentinel``).
    """
    start = time.perf_counter()
    engine = engine_factory(spec)
    with sentinel_session(hook, mpi_session_module=mpi_session_module, factory=sentinel_factory):
        traces = engine.run(
            prompts,
            batch_size=case.batch_size,
            max_draft_len=case.max_draft_len,
            max_new_tokens=max_new_tokens,
        )
    traces = validate_traces(traces, case.max_draft_len, expected=len(prompts))
    stats = summarize(traces, case.max_draft_len, counters=getattr(engine, "last_counters", None))
    return CaseRun(
        case=case,
        spec=spec,
        stats=stats,
        sentinel=read_report(hook.sink_dir),
        notes=list(getattr(engine, "last_notes", None) or []),
        wall_seconds=time.perf_counter() - start,
    )


class RunCache:
    """Runs each case at most once per session; batch-1 runs are shared by a whole series.

    A failed run is remembered too, so the cases that depend on it fail with the same error
    instead of paying for the same crash again.
    """

    def __init__(self, runner: Callable[[Case], CaseRun]) -> None:
        self._runner = runner
        self._done: dict[Case, CaseRun | BaseException] = {}

    def get(self, case: Case) -> CaseRun:
        if case not in self._done:
            try:
                self._done[case] = self._runner(case)
            except Exception as exc:
                self._done[case] = exc
        result = self._done[case]
        if isinstance(result, BaseException):
            raise result
        return result

    def __contains__(self, case: Case) -> bool:
        return case in self._done


def sink_dir_for(root: Path, case: Case) -> Path:
    """A fresh sentinel sink directory per case: ``<root>/<TestClass>/<case id>``."""
    path = Path(root) / case.model.test_class / case.id
    path.mkdir(parents=True, exist_ok=True)
    return path


PROMPTS_ENV = "REGRESS_TRTLLM_PROMPTS"
PROMPT_SET_ENV = "REGRESS_TRTLLM_PROMPT_SET"


def load_prompt_set(
    path: Path | str, *, limit: int | None = None, name: str | None = None
) -> tuple[str, list[Prompt]]:
    """Read prompts and name the set they form (acceptance depends on the prompts).

    Accepts the acceptance package's JSONL (``{"prompt": ...}`` / ``{"token_ids": [...]}``) and
    MT-bench's ``question.jsonl`` (``{"turns": [first, second]}``; the first turn is used).

    Returns:
        ``(name, prompts)``: ``name`` as given, else ``"mt_bench"`` for MT-bench files, else the
        file's stem.
    """
    prompts: list[Prompt] = []
    mt_bench = False
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        data = json.loads(line)
        if isinstance(data, dict) and "turns" in data:
            turns = data["turns"]
            if not turns or not isinstance(turns[0], str):
                raise UsageError(f'{where}: "turns" must start with a text turn')
            mt_bench = True
            prompts.append(turns[0])
        else:
            prompts.append(parse_prompt_line(line, where))
        if limit is not None and len(prompts) >= limit:
            break
    if not prompts:
        raise UsageError(f"prompts file {path} holds no prompts")
    return name or ("mt_bench" if mt_bench else Path(path).stem), prompts


def shared_prefix_prompts(prompts: Sequence[Prompt], *, count: int, prefix_chars: int) -> list[str]:
    """``count`` text prompts that share one long prefix, for the indexer-pool fill (#18660).

    The prefix is the prompts themselves, joined and repeated to ``prefix_chars`` characters
    (cut at a space); each request then asks one of them. With block reuse on, the requests
    share the prefix's KV blocks while each still needs its own indexer-K pages, which is the
    load under which TensorRT-LLM issue #18660 saw KV-manager V2 abort.

    Raises:
        UsageError: prompts that are token ids (the prefix is text).
    """
    texts = [p for p in prompts if isinstance(p, str)]
    if not texts or len(texts) != len(prompts):
        raise UsageError("the shared-prefix prompts are built from text prompts, not token ids")
    joined = "\n\n".join(texts)
    repeats = prefix_chars // len(joined) + 1
    prefix = "\n\n".join([joined] * repeats)[:prefix_chars]
    prefix = prefix[: prefix.rfind(" ")] if " " in prefix else prefix
    return [f"{prefix}\n\nQuestion {i + 1}: {texts[i % len(texts)]}" for i in range(count)]
