"""The acceptance report: a versioned JSON document (schema 1) and its human table."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from regress.acceptance.findings import Finding
from regress.acceptance.stats import CONVENTIONS, RunStats
from regress.errors import UsageError
from regress.files import read_text, write_atomic

SCHEMA = 1


@dataclass
class Run:
    """One batch size's run: its statistics plus what the profiler observed around them.

    Attributes:
        batch_size: requests in flight together.
        stats: the acceptance statistics.
        wall_seconds: engine time for the run.
        notes: engine remarks worth reading (cross-check mismatches, batch size not reached).
        sentinel: the DSA sentinel's violations during this run (None: sentinel off).
    """

    batch_size: int
    stats: RunStats
    wall_seconds: float | None = None
    notes: list[str] = field(default_factory=list)
    sentinel: list[dict] | None = None

    def to_dict(self) -> dict:
        # Flat on purpose: a run entry reads as {"batch_size": 8, "acceptance_length": ...}.
        return {
            "batch_size": self.batch_size,
            **self.stats.to_dict(),
            "wall_seconds": self.wall_seconds,
            "notes": list(self.notes),
            "sentinel": self.sentinel,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Run:
        return cls(
            batch_size=data["batch_size"],
            stats=RunStats.from_dict(data),
            wall_seconds=data.get("wall_seconds"),
            notes=list(data.get("notes", [])),
            sentinel=data.get("sentinel"),
        )


@dataclass
class Report:
    """Everything ``regress accept`` measured and concluded, in one document.

    Attributes:
        engine: the engine's name and options (``{"name": "reference", "device": "cpu", ...}``).
        model: what was profiled (a model name or checkpoint path).
        config: how it was profiled (batch sizes, K, prompts, tolerance, seed...).
        runs: one per batch size, ascending.
        verdicts: every check's outcome.
        sentinel: all DSA sentinel violations of the session (None when the sentinel was off).
        baseline: what the runs were compared against, if anything.
        conventions: the definitions of the reported numbers.
        schema: document version; readers refuse versions they do not know.
    """

    engine: dict
    model: str
    config: dict
    runs: list[Run]
    verdicts: list[Finding]
    sentinel: list[dict] | None = None
    baseline: dict | None = None
    conventions: dict = field(default_factory=lambda: dict(CONVENTIONS))
    schema: int = SCHEMA

    @property
    def regressed(self) -> bool:
        """True when any check found a regression (the CLI then exits 1)."""
        return any(v.regressed for v in self.verdicts)

    @property
    def regressed_batch_sizes(self) -> list[int]:
        """Batch sizes named by at least one failing verdict, ascending."""
        return sorted(
            {v.batch_size for v in self.verdicts if v.regressed and v.batch_size is not None}
        )

    def run_for(self, batch_size: int) -> Run | None:
        return next((r for r in self.runs if r.batch_size == batch_size), None)

    def stats_by_batch(self) -> dict[int, RunStats]:
        return {r.batch_size: r.stats for r in self.runs}

    def to_dict(self) -> dict:
        return {
            "schema": self.schema,
            "engine": self.engine,
            "model": self.model,
            "config": self.config,
            "conventions": self.conventions,
            "regressed": self.regressed,
            "regressed_batch_sizes": self.regressed_batch_sizes,
            "runs": [r.to_dict() for r in self.runs],
            "verdicts": [v.to_dict() for v in self.verdicts],
            "sentinel": self.sentinel,
            "baseline": self.baseline,
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        # allow_nan=False: a NaN would make the file unreadable to strict JSON parsers.
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping) -> Report:
        schema = data.get("schema")
        if schema != SCHEMA:
            raise UsageError(
                f"acceptance report has schema {schema!r}, this regress reads schema {SCHEMA}; "
                "regenerate it with this version of `regress accept --json`"
            )
        return cls(
            engine=dict(data["engine"]),
            model=data["model"],
            config=dict(data["config"]),
            runs=[Run.from_dict(r) for r in data["runs"]],
            verdicts=[Finding.from_dict(v) for v in data["verdicts"]],
            sentinel=data.get("sentinel"),
            baseline=data.get("baseline"),
            conventions=dict(data.get("conventions", CONVENTIONS)),
            schema=schema,
        )

    @classmethod
    def from_json(cls, text: str) -> Report:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"not an acceptance report (invalid JSON: {exc})") from exc
        if not isinstance(data, dict) or "runs" not in data:
            raise UsageError("not an acceptance report (no 'runs'); pass a file written by --json")
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError) as exc:
            raise UsageError(f"malformed acceptance report ({exc!r}); regenerate it") from exc

    def save(self, path: str | os.PathLike) -> Path:
        """Write the report atomically: a baseline is never left half-written.

        Raises:
            UsageError: the file cannot be written (a write error is the user's to fix, exit 2).
        """
        try:
            return write_atomic(path, self.to_json() + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write acceptance report {path}: {exc.strerror}") from exc

    @classmethod
    def load(cls, path: str | os.PathLike) -> Report:
        text = read_text(path, what="acceptance report")
        return cls.from_json(text)


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def format_table(report: Report) -> str:
    """The human view of a report: one row per batch size, then the verdicts."""
    k = int(
        report.config.get("max_draft_len", report.runs[0].stats.max_draft_len if report.runs else 0)
    )
    lines = [
        f"model {report.model}  engine {report.engine.get('name')}  K={k}  "
        f"prompts {report.config.get('num_prompts')}  max_new_tokens {report.config.get('max_new_tokens')}"
    ]
    pos_head = " ".join(f"{'p' + str(i + 1):>5s}" for i in range(k))
    cond_head = " ".join(f"{'c' + str(i + 1):>5s}" for i in range(k))
    lines.append(
        f"{'batch':>5s}  {'AL':>5s}  {'95% CI':^13s}  {pos_head}  | {cond_head}  {'steps':>6s}  verdict"
    )
    failing = set(report.regressed_batch_sizes)
    ref = report.config.get("reference_batch_size")
    for run in report.runs:
        s = run.stats
        ci = f"[{s.acceptance_length_ci[0]:.2f}, {s.acceptance_length_ci[1]:.2f}]"
        pos = " ".join(f"{p:5.3f}" for p in s.per_position)
        cond = " ".join(f"{_fmt(c):>5s}" for c in s.conditional)
        mark = (
            "REGRESSION"
            if run.batch_size in failing
            else ("ref" if run.batch_size == ref else "ok")
        )
        lines.append(
            f"{run.batch_size:>5d}  {s.acceptance_length:5.3f}  {ci:^13s}  {pos}  | {cond}  {s.steps:>6d}  {mark}"
        )
        lines.extend(f"       note: {n}" for n in run.notes)
    lines.append(
        "AL = 1 + accepted/steps (bonus token counted); p_i per-position, c_i conditional acceptance"
    )
    if report.verdicts:
        lines.append("verdicts:")
        lines.extend(f"  {v.summary()}" for v in report.verdicts)
    if report.sentinel:
        lines.append(f"sentinel: {len(report.sentinel)} violation(s)")
    return "\n".join(lines)
