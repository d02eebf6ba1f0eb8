"""``regress trend check`` on generated nightly series, one per defect landing on a known night.

    python benchmarks/trend_defects.py [--nights 16] [--land 9] [--prompts 8] [--tokens 24]

For each acceptance-level defect the series is written by ``regress.demo.nightly`` (the night's
code, not an engine option, carries the defect) and checked with ``regress trend check``'s
defaults. Prints which metrics raised an alarm and on which night, and the nights whose job
aborted.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from regress.demo.nightly import nightly_series

DEFECTS = (
    "stale_req_idx",
    "no_accept_v1_cache_manager",
    "index_share_rejected_branch",
    "indexer_pool_exhaustion",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=16)
    ap.add_argument("--land", type=int, default=9)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=24)
    args = ap.parse_args()
    print(
        f"| defect (lands on night {args.land} of {args.nights}) | alarms (metric: first bad night) "
        "| nights aborted | trend check exit | wall |"
    )
    print("| --- | --- | --- | --- | --- |")
    for defect in DEFECTS:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="regress-trend-defects-") as tmp:
            series = nightly_series(
                defect, Path(tmp), nights=args.nights, land=args.land,
                prompts=args.prompts, tokens=args.tokens,
            )  # fmt: skip
        found = series.first_bad_nights()
        shown = ", ".join(f"`{m}`: {n}" for m, n in found.items() if "per_position" not in m)
        extra = sum("per_position" in m for m in found)
        if extra:
            shown += f" (+{extra} per-position series)"
        failed = f"{series.failed[0]}-{series.failed[-1]}" if series.failed else "none"
        print(
            f"| `{defect}` | {shown or 'none'} | {failed} | {series.exit_code} "
            f"| {time.perf_counter() - start:.0f} s |",
            flush=True,
        )


if __name__ == "__main__":
    main()
