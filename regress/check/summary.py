"""``regress check --markdown``: the report as a pull request's job summary.

A reviewer reads, in this order: the verdict (and, for a gap, why no verdict), the upstream callers
whose layout changes the scenarios replay (the draft loop is located in the checked tree itself),
per scenario what was checked and the first finding, then everything the sandbox faked.
"""

from __future__ import annotations

from regress.check.catalog import SCENARIOS
from regress.check.known import headline, markdown_lines, md_cell
from regress.check.report import CheckReport
from regress.check.status import verdict_text


def _finding(result) -> str:
    if result.violations:
        v = result.violations[0]
        where = v.details.get("step", "")
        seen = ""
        if "actual" in v.details:
            seen = f"; seen `{v.details['actual'][:16]}`, want `{v.details['expected'][:16]}`"
        return f"{where}: {v.message}{seen}"
    return result.note or ""


def _draft_loop(report: CheckReport) -> str | None:
    """Where the checked tree's draft loop is (from the tree the report carries)."""
    tree = report.tree
    loop = tree.draft_loop if tree is not None else None
    if loop is None:
        return None
    return f"`{loop.file.relative_to(tree.package_dir.parent)}` `{loop.qualname}`"


def markdown(report: CheckReport) -> str:
    """The report as GitHub-flavoured markdown (a job summary or a PR comment)."""
    era = f"era {report.era}" if report.era else "era unknown"
    out = [
        f"### regress check: {verdict_text(report.status)}{headline(report.known)} "
        f"(exit {report.exit_code})",
        "",
        f"Tree `{report.source}`, {era}, {report.seconds:.1f} s {report.where}.",
    ]
    if report.error:
        out += ["", f"> {md_cell(report.error)}"]
    loop = _draft_loop(report)
    callers = {s.name: s.caller for s in SCENARIOS}
    order = list(callers)
    families = sorted(
        {r.name.split("/", 1)[0] for r in report.results},
        key=lambda f: (order.index(f) if f in order else len(order), f),
    )
    if families:
        out += ["", "**Upstream callers replayed**", ""]
        out += [f"- `{f}`: {callers.get(f, '')}" for f in families]
        if loop:
            out.append(f"- draft loop in this tree: {loop}")
    if report.results:
        out += ["", "| scenario | verdict | maps checked | first finding |", "|---|---|---|---|"]
        for r in report.results:
            maps = len(r.steps) or "-"
            out.append(f"| `{r.name}` | {r.status} | {maps} | {md_cell(_finding(r))} |")
    out += markdown_lines(report.known)
    out += _faked(report)
    return "\n".join(out) + "\n"


def _faked(report: CheckReport) -> list[str]:
    ledger = report.ledger
    if not ledger.fakes and not ledger.real_modules:
        return []
    fakes = sorted(ledger.fakes.values(), key=lambda f: (f.kind, f.name))
    kinds: dict[str, int] = {}
    for f in fakes:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    head = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    out = [
        "",
        f"<details><summary>What was faked ({head}); real modules executed: "
        f"{len(ledger.real_modules)}</summary>",
        "",
        "Real: " + ", ".join(f"`{m}`" for m in ledger.real_modules),
        "",
        "| kind | name | used | instead |",
        "|---|---|---|---|",
    ]
    out += [f"| {f.kind} | `{f.name}` | {f.count} | {md_cell(f.detail)} |" for f in fakes]
    if ledger.divergences:
        out += ["", "CPU/GPU divergences:", ""]
        out += [f"- {md_cell(d)}" for d in ledger.divergences]
    return [*out, "", "</details>"]
