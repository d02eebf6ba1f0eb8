"""What the sentinel recorded in every process, merged from the per-process JSON-lines files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SentinelReport:
    """What every process recorded: attachments, violations and hook errors."""

    attached: list[dict[str, Any]]
    violations: list[dict[str, Any]]
    errors: list[dict[str, Any]]

    @property
    def clean(self) -> bool:
        """True only when the sentinel ran (something attached) and saw nothing wrong."""
        return bool(self.attached) and not self.violations and not self.errors


def read_report(sink_dir: Path | str) -> SentinelReport:
    """Merge the JSON-lines files of every process under ``sink_dir``."""
    attached, violations, errors = [], [], []
    for path in sorted(Path(sink_dir).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a worker killed mid-write leaves a torn last line
                errors.append({"event": "error", "where": str(path), "error": f"bad line {line!r}"})
                continue
            {"attached": attached, "violation": violations}.get(record.get("event"), errors).append(
                record
            )
    return SentinelReport(attached, violations, errors)
