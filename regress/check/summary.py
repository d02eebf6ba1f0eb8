"""``regress check --markdown``: the report as a pull request's job summary.

A reviewer reads, in this order: the verdict (and, for a gap, why no verdict), the upstream callers
whose layout changes the scenarios replay (the draft loop is located in the checked tree itself),
per scenario what was checked and the first finding, then everything the sandbox faked.
"""

from __future__ import annotations

from regress.check.report import CheckReport

VERDICTS = {
    "pass": "contracts hold",
    "fail": "a contract is broken",
    "gap": "no verdict: the sandbox could not run this tree",
    "not-a-tree": "not a TensorRT-LLM tree with DSA metadata",
}
#: Per scenario family, the upstream caller whose calls it replays (see each scenario's docstring).
CALLERS = {
    "req_idx_map": "the tree's own one-model worker where it has one (each result names it), "
    "else regress's model of the MTP-Eagle draft loop",
    "shape_announcement": "the executor's `update_spec_dec_param()` before `prepare()`",
    "runner_guard": "`tools/layer_wise_benchmarks/runner.py` `Runner.create_run_pack('GEN')`",
    "sentinel_lifecycle": "two executor forwards and a draft loop, with the runtime sentinel",
    "draft_callers": "every one-model worker of the tree (`speculative/*.py`), its own draft loop",
    "metadata_classes": "every DSA-family metadata class of the tree, each map it carries",
    "fused_metadata": "the fused decode-metadata kernel with the tree's gate on (Triton, run for real)",
    "draft_kv_cache": "the worker's switch to a separate draft KV cache",
    "ragged_verify": "per-request verification windows and their row maps",
    "stale_state": "two forwards and their draft loops, every checkpoint compared with a "
    "metadata object prepared from scratch",
}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _finding(result) -> str:
    if result.violations:
        v = result.violations[0]
        where = v.details.get("step", "")
        seen = ""
        if "actual" in v.details:
            seen = f"; seen `{v.details['actual'][:16]}`, want `{v.details['expected'][:16]}`"
        return f"{where}: {v.message}{seen}"
    return result.note or ""


def _draft_loop(source: str) -> str | None:
    from regress.tree.layout import TrtllmLayoutError, resolve_source_tree

    try:
        layout = resolve_source_tree(source)
    except (TrtllmLayoutError, OSError):
        return None
    loop = layout.draft_loop
    if loop is None:
        return None
    return f"`{loop.file.relative_to(layout.package_dir.parent)}` `{loop.qualname}`"


def markdown(report: CheckReport) -> str:
    """The report as GitHub-flavoured markdown (a job summary or a PR comment)."""
    era = f"era {report.era}" if report.era else "era unknown"
    out = [
        f"### regress check: {VERDICTS[report.status]} (exit {report.exit_code})",
        "",
        f"Tree `{report.source}`, {era}, {report.seconds:.1f} s on a CPU.",
    ]
    if report.error:
        out += ["", f"> {_cell(report.error)}"]
    loop = _draft_loop(report.source) if report.status != "not-a-tree" else None
    order = list(CALLERS)
    families = sorted(
        {r.name.split("/", 1)[0] for r in report.results},
        key=lambda f: (order.index(f) if f in order else len(order), f),
    )
    if families:
        out += ["", "**Upstream callers replayed**", ""]
        out += [f"- `{f}`: {CALLERS.get(f, '')}" for f in families]
        if loop:
            out.append(f"- draft loop in this tree: {loop}")
    if report.results:
        out += ["", "| scenario | verdict | maps checked | first finding |", "|---|---|---|---|"]
        for r in report.results:
            maps = len(r.steps) or "-"
            out.append(f"| `{r.name}` | {r.status} | {maps} | {_cell(_finding(r))} |")
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
    out += [f"| {f.kind} | `{f.name}` | {f.count} | {_cell(f.detail)} |" for f in fakes]
    if ledger.divergences:
        out += ["", "CPU/GPU divergences:", ""]
        out += [f"- {_cell(d)}" for d in ledger.divergences]
    return [*out, "", "</details>"]
