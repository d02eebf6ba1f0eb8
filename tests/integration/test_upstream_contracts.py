"""The DSA contracts against a real TensorRT-LLM source tree (``--trtllm-src PATH``), on a CPU.

Skipped with the reason when no tree is given. One test per scenario, so a report names what
broke; each fails with the violations ``regress check`` found (layout and values seen).
"""

from __future__ import annotations

import pytest

from regress.check.catalog import scenario_names
from regress.check.check import run_check


@pytest.mark.parametrize("scenario", scenario_names())
def test_contract_holds_on_real_tree(trtllm_src, scenario):
    report = run_check(trtllm_src, scenarios=[scenario])
    if report.status == "not-a-tree":
        pytest.fail(report.error)
    if report.status == "gap":
        pytest.skip(f"the sandbox cannot load this tree: {report.error}")
    broken = [r for r in report.results if r.status in ("fail", "error")]
    assert not broken, "\n".join(
        [f"{r.name}: {r.note}" for r in broken if r.status == "error"]
        + [
            f"{r.name}: {v.details.get('step', '')}: {v.message}"
            for r in broken
            for v in r.violations
        ]
    )
