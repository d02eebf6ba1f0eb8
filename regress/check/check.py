"""``regress check``'s library side: resolve the tree, load it in the sandbox, run the scenarios.

:func:`run_check` runs in the process that calls it; ``regress check`` and the ``trtllm-source``
bisect recipe run it in a child process (:mod:`regress.check.isolation`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from regress.check.catalog import SCENARIOS, Scenario, by_name
from regress.check.matrix import base_cell, cells, find_axes
from regress.check.production import run_cells
from regress.check.report import CheckReport
from regress.check.results import ScenarioResult
from regress.check.status import ReportStatus, ScenarioStatus
from regress.sandbox import Ledger, SandboxGap
from regress.sandbox.blame import blame, describe
from regress.sandbox.cuda import require_device
from regress.sandbox.eras import Settings, Upstream, all_values, load, plan_for
from regress.sandbox.shells import Sandbox
from regress.tree.source import (
    SourceTree,
    SourceTreeError,
    UnreadableSourceError,
    resolve_source_tree,
)

#: The environment variable naming the tree when ``--trtllm-src`` is not given.
ENV_VAR = "REGRESS_TRTLLM_SRC"

#: What a gap asks of the reader (exit 3; a bisect probe skips the commit).
NEXT = ". No contract was judged: fix the tree, or check another commit (a bisect skips this one)"


def resolve_into(report: CheckReport, source: Path | str) -> SourceTree | None:
    """The tree at ``source``, or None with ``report`` saying why: not a tree (bad input, exit 2)
    or a tree whose DSA file cannot be read (no verdict, exit 3)."""
    try:
        return resolve_source_tree(source)
    except SourceTreeError as exc:
        report.status, report.error = ReportStatus.NOT_A_TREE, str(exc)
    except UnreadableSourceError as exc:
        report.status, report.error = ReportStatus.GAP, str(exc)
    return None


def run_check(
    source: Path | str,
    *,
    scenarios: Sequence[str] | None = None,
    settings: Settings | None = None,
    matrix: Sequence[str] = ("default",),
) -> CheckReport:
    """Run the contract scenarios against the real DSA metadata of the tree at ``source``.

    Never raises for a tree that is not TensorRT-LLM or cannot be loaded: those become the
    report's ``not-a-tree`` / ``gap`` status (exit 2 / 3), so a bisect probe gets an exit code.
    Raises :class:`~regress.errors.UsageError` for ``device="cuda"`` where torch sees no GPU.

    Args:
        source: a TensorRT-LLM checkout (or its ``tensorrt_llm`` directory).
        scenarios: names of :data:`~regress.check.catalog.SCENARIOS` (default: all but the
            opt-in ones).
        settings: SM version and SM count the code is told it runs on, and the device
            (``cpu``: CUDA mapped onto the CPU; ``cuda``: upstream native on the GPU).
        matrix: the ``--matrix`` specs (:func:`regress.check.matrix.cells`) the per-cell
            scenarios (``matrix``) run in; the others run once, in the base cell
            (:data:`regress.check.matrix.BASE`).
    """
    started = time.monotonic()
    settings = settings or Settings()
    require_device(settings.device)
    report = CheckReport(source=str(source), device=settings.device)
    wanted = list(scenarios or [s.name for s in SCENARIOS if not s.opt_in])
    table = by_name()
    tree = resolve_into(report, source)
    if tree is None:
        return report
    report.era, report.tree = tree.era.name, tree
    plan = plan_for(tree)
    ledger = Ledger()
    report.ledger = ledger
    try:
        with Sandbox(
            plan.checkout,
            plan.real,
            all_values(plan, settings),
            env=plan.session_env(settings.fused),
            ledger=ledger,
            device=settings.device,
        ) as sandbox:
            up = _load(sandbox, plan, ledger)
            for name in (n for n in wanted if not table[n].per_cell):
                report.results.extend(_run(table[name], up))
    except SandboxGap as exc:
        report.status, report.error = ReportStatus.GAP, str(exc)
    except (Exception, SystemExit) as exc:  # not importable: a syntax error, NUL bytes, an exit
        found = blame(exc, plan.checkout)
        cause = describe(exc, found)
        if found.owner not in ("import", "exit"):
            cause = f"loading the tree raised {cause}"
        report.status, report.error = ReportStatus.GAP, cause + NEXT
    axes = find_axes(tree, plan.fused_gates)
    base = str(base_cell(axes, settings.sm, plan.fused_in(plan.session_env(settings.fused))))
    for result in report.results:  # the scenarios outside the matrix ran in the base cell
        for v in result.violations:
            v.details.setdefault("cell", base)
    report.cells = [base]
    per_cell = [table[n] for n in wanted if table[n].per_cell]
    if per_cell and report.status != ReportStatus.GAP:
        run = cells(matrix, axes)
        report.cells += [str(c) for c in run]
        report.results += run_cells(plan, run, per_cell, settings, ledger, load=_load, run=_run)
    if settings.device == "cpu":  # natively the GPU's own branch is taken
        _divergences(ledger, plan)
    report.finish()
    report.seconds = time.monotonic() - started
    return report


def _load(sandbox: Sandbox, plan, ledger: Ledger) -> Upstream:
    return load(sandbox, plan, ledger)


def _run(scenario: Scenario, up: Upstream) -> list[ScenarioResult]:
    """The scenario's results; one ``gap`` result when it could not judge the tree.

    Only an exception whose innermost non-library frame is upstream's is a verdict (a broken
    contract); one raised in a fake, a stub, the CUDA runtime, an import, an exit or regress's own
    driver is a gap (:mod:`regress.sandbox.blame`), which :meth:`CheckReport.finish` turns into
    the report's gap unless a contract is broken elsewhere.
    """
    try:
        return scenario.run(up)
    except (Exception, SystemExit) as exc:
        found = blame(exc, up.plan.checkout)
        result = ScenarioResult(scenario.name, status=ScenarioStatus.GAP)
        if found.is_gap:
            result.note = describe(exc, found)
            return [result]
        from regress.dsa.invariants import Violation

        message = f"upstream raised {describe(exc, found)}"
        result.add([Violation("upstream_raised", message, {"site": found.site})], "while running")
        return [result]


def _divergences(ledger: Ledger, plan) -> None:
    """Where the CPU run takes another branch than a GPU would (found by reading upstream)."""
    for name in ledger.real_modules:
        file = plan.checkout / (name.replace(".", "/") + ".py")
        text = file.read_text(errors="replace") if file.is_file() else ""
        if re.search(r"\.is_cuda\b", text) and "def _compute_slot_mappings" in text:
            ledger.divergences.append(
                f"{name}: _compute_slot_mappings clamps out-of-range block indices on CUDA but "
                "asserts on a CPU, so an out-of-range index fails here where a GPU would write "
                "to a clamped (wrong) slot"
            )
