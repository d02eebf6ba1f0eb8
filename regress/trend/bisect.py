"""The ``regress bisect run`` command a detected regression hands over, and the one seam running it.

Like Chromeperf handing an anomaly to Pinpoint, a change point between the last good and first bad
nights becomes a bisect over exactly that range, probing the same metric with the same
configuration that produced the series: the command CI recorded with ``regress trend add
--command``, or else the ``regress accept`` command the report's engine and config spell out.
``regress bisect``'s metric probe reads index paths (``runs[1]``), so selectors are resolved
against the first bad night's report; a ratio is bisected through its numerator (the batch size
that moved; the denominator is the control that did not).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from regress.errors import UsageError
from regress.processes import run_child
from regress.trend.series import Metric, index_path

#: How a plan's argv starts; ``run_plan`` swaps it for this interpreter's ``-m regress``.
REGRESS = "regress"


def accept_command(report: Mapping) -> list[str]:
    """The ``regress accept`` argv that reproduces ``report``'s measurement, JSON on stdout.

    Raises:
        UsageError: for an engine ``regress accept`` cannot drive (record ``--command`` instead).
    """
    engine = report.get("engine", {})
    config = report.get("config", {})
    name = engine.get("name")
    if name not in ("reference", "trtllm"):
        raise UsageError(
            f"the series was measured by the {name!r} engine, which `regress accept` cannot run; "
            "record how CI measures it with `regress trend add --command '...'`"
        )
    argv = [REGRESS, "accept", "--engine", name]
    if name == "trtllm":
        argv += ["--model", str(report.get("model"))]
    argv += ["--batch-sizes", ",".join(str(b) for b in config.get("batch_sizes", []))]
    for option, key in (
        ("--max-draft-len", "max_draft_len"),
        ("--max-new-tokens", "max_new_tokens"),
        ("--seed", "seed"),
        ("--tolerance", "tolerance"),
    ):
        if config.get(key) is not None:
            argv += [option, str(config[key])]
    prompts = config.get("prompts")
    if prompts not in (None, "builtin"):
        argv += ["--prompts", str(prompts)]
    if config.get("num_prompts") is not None:
        argv += ["--num-prompts", str(config["num_prompts"])]
    if engine.get("device"):
        argv += ["--device", str(engine["device"])]
    if engine.get("cuda_graph") is not None:
        argv.append("--cuda-graph" if engine["cuda_graph"] else "--no-cuda-graph")
    for defect in engine.get("defects") or []:
        argv += ["--defect", str(defect)]
    return [*argv, "--json", "-"]


@dataclass
class BisectPlan:
    """One bisect over a change point's commit range.

    Attributes:
        good: the last good night's commit.
        bad: the first bad night's commit.
        metric: the series it came from (e.g. ``runs[batch=8].acceptance_length``).
        probe_path: the same metric as ``regress bisect --metric`` reads it (``runs[1]...``).
        direction: +1 higher is better.
        command: the measurement to run at each commit.
        options: further ``regress bisect run`` options (``--repo``, ``--overlay``...).
        threshold: judge each run alone against this value (one run per commit) instead of
            against repeated measurements of both ends: for a deterministic measurement.
    """

    good: str
    bad: str
    metric: str
    probe_path: str
    direction: int
    command: list[str]
    options: list[str] = field(default_factory=list)
    threshold: float | None = None

    @property
    def argv(self) -> list[str]:
        way = "--higher-is-better" if self.direction > 0 else "--lower-is-better"
        return [
            REGRESS,
            "bisect",
            "run",
            "--good",
            self.good,
            "--bad",
            self.bad,
            *self.options,
            "--probe",
            "metric",
            "--metric",
            self.probe_path,
            way,
            *(["--threshold", f"{self.threshold:.6g}"] if self.threshold is not None else []),
            "--",
            *self.command,
        ]

    @property
    def shell(self) -> str:
        """The command as one shell line, to print or paste."""
        return shlex.join(self.argv)

    def to_dict(self) -> dict:
        return {
            "good": self.good,
            "bad": self.bad,
            "metric": self.metric,
            "probe_path": self.probe_path,
            "argv": self.argv,
            "command": self.shell,
        }


def plan_bisect(
    metric: Metric,
    good: str,
    bad: str,
    report: Mapping,
    command: Sequence[str] | None,
    options: Sequence[str] = (),
    levels: tuple[float, float] | None = None,
) -> BisectPlan:
    """The bisect for a regression of ``metric`` first seen in ``report`` (the first bad night).

    Args:
        command: what CI recorded for that night; ``None`` rebuilds ``regress accept`` from the
            report.
        options: passed to ``regress bisect run`` before the probe options.
        levels: the series' level before and after the change: with them, each run is judged
            against their midpoint (``--threshold``). Only for a plain path: a ratio's levels are
            not its numerator's.
    """
    return BisectPlan(
        good=good,
        bad=bad,
        metric=metric.text,
        probe_path=index_path(metric.paths[0], report),
        direction=metric.direction,
        command=list(command) if command else accept_command(report),
        options=list(options),
        threshold=sum(levels) / 2 if levels and len(metric.paths) == 1 else None,
    )


def _spawn(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """The one place a bisect process starts (tests replace this function).

    In its own process group, ended with it on Ctrl-C, SIGTERM or ``kill -9`` of this process
    (:func:`regress.processes.run_child`).
    """
    return run_child(argv, **kwargs)


def run_plan(plan: BisectPlan, **kwargs) -> subprocess.CompletedProcess:
    """Start the bisect (this interpreter's regress) and wait for it.

    ``kwargs`` go to :func:`subprocess.run` (``capture_output=True`` to read ``--json -`` back).
    The return code is ``regress bisect``'s: 0 culprit, 3 inconclusive, 2 bad input.
    """
    argv = plan.argv
    if argv[0] == REGRESS:
        argv = [sys.executable, "-m", "regress", *argv[1:]]
    return _spawn(argv, **kwargs)
