"""What makes two acceptance measurements comparable: the same workload, defined once.

Two runs measured the same thing only if they drafted as deep (``max_draft_len``), generated as
long (``max_new_tokens``) and served the same prompts, recognised by content (``prompts_digest``,
not by the file name a run was given: an edited prompts file is another workload). A baseline is
checked against a run with :func:`mismatches` (``regress accept --baseline``); the nightly trend
keeps one series per workload (:func:`regress.trend.store.configuration_of`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from regress.acceptance.engines import Prompt

#: The report ``config`` keys that define a workload.
WORKLOAD_KEYS = ("max_draft_len", "max_new_tokens", "num_prompts", "prompts_digest")


def prompts_digest(prompts: Sequence[Prompt]) -> str:
    """A short fingerprint of the prompts, so a baseline on other prompts is recognised."""
    text = json.dumps([p if isinstance(p, str) else [int(t) for t in p] for p in prompts])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Workload:
    """What an acceptance figure was measured on: the same K, output budget and prompts."""

    max_draft_len: int
    max_new_tokens: int
    num_prompts: int
    prompts_digest: str

    @classmethod
    def of(cls, prompts: Sequence[Prompt], *, max_new_tokens: int, max_draft_len: int) -> Workload:
        return cls(max_draft_len, max_new_tokens, len(prompts), prompts_digest(prompts))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Workload | None:
        """From a report's config or an entry's ``workload``; None when a key is missing."""
        if not isinstance(data, Mapping) or any(data.get(k) is None for k in WORKLOAD_KEYS):
            return None
        return cls(**{k: data[k] for k in WORKLOAD_KEYS})

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in WORKLOAD_KEYS}

    def mismatches(self, recorded: Mapping[str, Any]) -> list[str]:
        """``["num_prompts=80 (this run: 8)", ...]``: where ``recorded`` differs from this one."""
        return mismatches(recorded, self.to_dict())


def workload(prompts: Sequence[Prompt], *, max_draft_len: int, max_new_tokens: int) -> dict:
    """The workload of a run, as its report's ``config`` records it."""
    return Workload.of(
        prompts, max_draft_len=max_draft_len, max_new_tokens=max_new_tokens
    ).to_dict()


def workload_of(config: Mapping) -> dict:
    """The workload part of a report's ``config`` (a key it lacks is None)."""
    return {k: config.get(k) for k in WORKLOAD_KEYS}


def mismatches(theirs: Mapping, ours: Mapping) -> list[str]:
    """The workload settings in which ``theirs`` differs from ``ours``, one phrase each.

    A key either side lacks (a report from before it was recorded) is not compared, nor are the
    prompts' digests when their counts already differ (that says the same thing twice).

    Returns:
        e.g. ``["num_prompts=80 (this run: 8)"]``; empty when the workloads match.
    """
    out = []
    for key in WORKLOAD_KEYS:
        a, b = theirs.get(key), ours.get(key)
        if key == "prompts_digest" and any(m.startswith("num_prompts=") for m in out):
            continue
        if a is not None and b is not None and a != b:
            out.append(f"{key}={a} (this run: {b})")
    return out
