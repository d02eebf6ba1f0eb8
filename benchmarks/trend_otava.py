"""Run Apache Otava's detector on series from stdin; for benchmarks/trend_compare.py only.

Runs in a throwaway venv that has ``apache-otava`` (never a regress dependency):

    python3 -m venv /tmp/otava-venv && /tmp/otava-venv/bin/pip install apache-otava

stdin: ``{"series": [[...], ...], "window_len": 50, "max_pvalue": 0.001, "min_magnitude": 0.0}``;
stdout: per series, its change points as ``{"index", "before", "after", "pvalue"}`` (index: the
first point of the new level, as Otava reports it).
"""

import json
import sys

from otava.analysis import compute_change_points


def main() -> None:
    job = json.load(sys.stdin)
    out = []
    for values in job["series"]:
        points, _ = compute_change_points(
            [float(v) for v in values],
            window_len=job.get("window_len", 50),
            max_pvalue=job.get("max_pvalue", 0.001),
            min_magnitude=job.get("min_magnitude", 0.0),
        )
        out.append(
            [
                {
                    "index": int(p.index),
                    "before": float(p.stats.mean_1),
                    "after": float(p.stats.mean_2),
                    "pvalue": float(p.stats.pvalue),
                }
                for p in points
            ]
        )
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
