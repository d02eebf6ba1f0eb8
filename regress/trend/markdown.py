"""A check's findings as markdown, for an issue or PR comment (``--markdown``)."""

from __future__ import annotations

from regress.trend.check import CheckResult


def _sha(commit: str) -> str:
    return f"`{commit[:12]}`"


def to_markdown(result: CheckResult) -> str:
    """A headline, a table of change points (alarms first) and the bisect commands."""
    alarms = result.alarms
    lines = [
        "### regress trend: "
        + (
            f"{len(alarms)} acceptance regression(s)" if alarms else "no open acceptance regression"
        ),
        "",
        f"{len(result.series)} series checked in `{result.store}` "
        f"(e-divisive means, permutation p <= {result.config.alpha}, "
        f"steps >= {result.config.min_change:.0%}).",
        "",
    ]
    if result.findings:
        lines += [
            "| status | metric | configuration | last good | first bad | before | after | change | p |",
            "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |",
        ]
        ordered = sorted(result.findings, key=lambda f: (not f.alarm, f.first_bad["date"]))
        for f in ordered:
            c = f.change
            status = (
                "**REGRESSION**"
                if f.alarm
                else ("regression (recovered)" if c.regression and not f.open else c.kind)
            )
            if c.regression and f.open and not f.alarm:
                status = "regression (before --since)"
            lines.append(
                f"| {status} | `{f.metric}` | {f.configuration} | "
                f"{_sha(f.last_good['commit'])} {f.last_good['date'][:10]} | "
                f"{_sha(f.first_bad['commit'])} {f.first_bad['date'][:10]} | "
                f"{c.before:.4g} | {c.after:.4g} | {c.relative:+.1%} | {c.p_value:.3f} |"
            )
    else:
        lines.append("No change points.")
    if result.bisects:
        lines += ["", "Bisect the range with:", ""]
        for plan in result.bisects:
            lines += ["```bash", plan.shell, "```"]
    return "\n".join(lines) + "\n"
