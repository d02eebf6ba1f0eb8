"""From a parsed ``/bot run`` to the stages to run and each stage's pytest argv (lists, not strings).

Stage choice mirrors the upstream bot's flags: by default every pre-merge single-GPU stage;
``--post-merge`` adds post-merge stages, ``--add-multi-gpu-test`` adds multi-GPU ones,
``--only-multi-gpu-test`` keeps only those, ``--gpu-type``/``--test-backend`` filter,
``--only-perf-sanity-test`` keeps the ``PerfSanity`` stages (upstream's naming),
``--stage-list`` names stages outright, ``--extra-stage`` appends, ``--skip-test`` runs none.
Each stage also says which runner labels it needs (``runs_on``): a GPU stage runs on a
self-hosted runner labelled with its GPU type, a CPU stage on a hosted one; the /bot workflow
hands the plan to its test job as a matrix.
The argv is executed without a shell (``subprocess.run(argv)``), so even a stage name that slipped
through validation could not become a command.
"""

from __future__ import annotations

from dataclasses import dataclass

from regress.ci.bot import BotCommand, RunOptions
from regress.ci.stages import WAIVES_FILE, StageLists
from regress.ci.testlist import Stage
from regress.errors import UsageError

#: Runner labels of a stage that needs no GPU (a GitHub-hosted runner).
CPU_RUNNER = ("ubuntu-latest",)


def runner_labels(stage: Stage) -> tuple[str, ...]:
    """``runs-on`` labels: self-hosted, ``gpu``, the GPU type lower-cased, ``gpus-N``."""
    if stage.gpu_count == 0:
        return CPU_RUNNER
    return ("self-hosted", "gpu", stage.gpu_type.lower(), f"gpus-{stage.gpu_count}")


@dataclass(frozen=True)
class StagePlan:
    """One stage to run: its name, the argv to run it with, where its JUnit lands, its runner."""

    stage: str
    argv: tuple[str, ...]
    junit_xml: str
    runs_on: tuple[str, ...] = CPU_RUNNER


@dataclass(frozen=True)
class Plan:
    """What a comment asks the pipeline to do."""

    action: str  # the bot command: run, kill, skip, reuse-pipeline, help
    fail_fast: bool
    stages: tuple[StagePlan, ...]
    high_priority: bool = False
    reuse: str | None = None  # "last", a pipeline id, or None (--disable-reuse-test / default)

    def to_json(self) -> dict:
        return {
            "schema": 1,
            "action": self.action,
            "fail_fast": self.fail_fast,
            "high_priority": self.high_priority,
            "reuse": self.reuse,
            "stages": [
                {
                    "stage": s.stage,
                    "argv": list(s.argv),
                    "junit_xml": s.junit_xml,
                    "runs_on": list(s.runs_on),
                }
                for s in self.stages
            ],
        }


def choose_stages(options: RunOptions, stages: dict[str, Stage]) -> list[Stage]:
    """The stages a ``run`` selects, in ``stages.yml`` order (explicit lists keep their order)."""
    if options.skip_test:
        return []
    if options.stage_list:
        chosen = [stages[name] for name in options.stage_list]
    else:
        chosen = []
        for stage in stages.values():
            if options.only_perf_sanity_test:
                # Perf-sanity stages are multi-GPU post-merge ones: the flag picks them as such.
                if "PerfSanity" not in stage.name:
                    continue
            elif (stage.post_merge and not options.post_merge) or (
                stage.multi_gpu and not (options.add_multi_gpu_test or options.only_multi_gpu_test)
            ):
                continue
            if options.only_multi_gpu_test and not stage.multi_gpu:
                continue
            if options.gpu_type and stage.gpu_type not in options.gpu_type:
                continue
            if options.test_backend and stage.backend not in options.test_backend:
                continue
            chosen.append(stage)
    for name in options.extra_stage:
        if all(s.name != name for s in chosen):
            chosen.append(stages[name])
    return chosen


def stage_argv(
    stage: Stage,
    lists: StageLists,
    *,
    options: RunOptions,
    test_lists_dir: str,
    results_dir: str,
    python: str,
) -> StagePlan:
    """The pytest command line for one stage, as Jenkins would run it."""
    db = lists.db_for(stage)
    junit = f"{results_dir}/{stage.name}/results.xml"
    argv = [python, "-m", "pytest", "--test-list", f"{test_lists_dir}/{db.path.name}"]
    argv += ["--stage", stage.name, f"--junit-xml={junit}", "-o", f"junit_suite_name={stage.name}"]
    if (lists.directory / WAIVES_FILE).is_file():
        argv += ["--waives", f"{test_lists_dir}/{WAIVES_FILE}"]
    if stage.gpu_count >= 1:
        argv += ["--require-gpu", "--gpu-per-worker"]
    argv += list(stage.pytest_args)
    if options.detailed_log:
        argv += ["-vv", "--log-level=DEBUG"]
    return StagePlan(stage.name, tuple(argv), junit, runner_labels(stage))


def plan(
    command: BotCommand,
    lists: StageLists,
    *,
    test_lists_dir: str = "test-lists",
    results_dir: str = "results",
    python: str = "python",
) -> Plan:
    """The pipeline plan for a validated command; non-``run`` commands plan no stages.

    Raises:
        UsageError: a ``run`` whose flags select no stage at all (say so rather than run nothing).
    """
    if command.command != "run" or command.options is None:
        return Plan(command.command, True, ())
    options = command.options
    chosen = choose_stages(options, lists.stages)
    if not chosen and not options.skip_test:
        raise UsageError(
            "/bot run selects no stage with these flags; check --gpu-type/--test-backend "
            f"against test-lists/stages.yml (stages: {', '.join(lists.stages)})"
        )
    plans = tuple(
        stage_argv(
            stage,
            lists,
            options=options,
            test_lists_dir=test_lists_dir,
            results_dir=results_dir,
            python=python,
        )
        for stage in chosen
    )
    reuse = None
    if options.reuse_test:
        reuse = options.reuse_pipeline_id or "last"
    return Plan("run", not options.disable_fail_fast, plans, options.high_priority, reuse)
