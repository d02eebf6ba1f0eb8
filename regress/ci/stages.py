"""A test-db directory: its list files and, optionally, ``stages.yml`` (stage -> declared facts).

Upstream Jenkins maps a stage name such as ``H100_PCIe-PyTorch-1`` to a test-db context and a
node whose live facts ``trt-test-db`` matches against block conditions; upstream's ``test-db/``
folder holds only the lists, and is read here as it is (select with a context and a facts query).
This repository also declares its own stages' facts in ``stages.yml``, which makes a stage's
selection a pure function of the repository: the same on a laptop, on the CI node and in
``regress bot plan``. ``stages.yml`` may give any further fact a condition tests under ``facts:``
(``cpu: x86_64``, ``orchestrator: mpi``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from regress.ci.testlist import (
    BACKENDS,
    STAGE_NAME,
    STAGE_TERMS,
    Entry,
    Stage,
    TestDb,
    TestListError,
    load_test_db,
)
from regress.ci.yamlnodes import NodeReader, Problem, closest, did_you_mean
from regress.errors import UsageError

STAGES_FILE = "stages.yml"
WAIVES_FILE = "waives.txt"
_STAGE_KEYS = ("test_db", "gpu_type", "gpu_count", "stage", "backend")
_STAGE_OPTIONAL = ("linux_distribution_name", "pytest_args", "description", "facts")


def load_stages(path: Path, *, display: str | None = None) -> dict[str, Stage]:
    """Parse ``stages.yml``: ``stages: {NAME: {test_db, gpu_type, gpu_count, stage, backend}}``."""
    reader = NodeReader(display or str(path))
    stages: dict[str, Stage] = {}
    root = reader.read(path)
    for key, key_node, value in reader.mapping(root, "stages.yml"):
        if key == "version":
            continue
        if key != "stages":
            reader.unknown_key(key_node, key, ("version", "stages"), "stages.yml")
            continue
        for name, name_node, spec in reader.mapping(value, "stages"):
            stage = _parse_stage(reader, name, name_node, spec)
            if stage is not None:
                stages[name] = stage
    if reader.problems:
        raise TestListError(reader.problems)
    return stages


def _parse_stage(reader: NodeReader, name: str, name_node: object, spec: object) -> Stage | None:
    import yaml

    if not STAGE_NAME.fullmatch(name):
        reader.add(name_node, f"stage name {name!r} may hold only letters, digits, '_', '.', '-'")
        return None
    values: dict[str, object] = {}
    allowed = {"stage": STAGE_TERMS, "backend": BACKENDS}
    for key, key_node, value in reader.mapping(spec, f"stage {name!r}"):
        if key == "gpu_count":
            values[key] = reader.integer(value, f"{name}.gpu_count")
        elif key == "facts":
            facts = []
            for fact, _, fact_value in reader.mapping(value, f"{name}.facts"):
                if not isinstance(fact_value, yaml.ScalarNode):
                    reader.add(fact_value, f"{name}.facts.{fact} must be a single value")
                    continue
                facts.append((fact, reader.scalar(fact_value)))
            values["extra_facts"] = tuple(facts)
        elif key == "pytest_args":
            values[key] = tuple(
                reader.string(v, f"{name}.pytest_args item") or ""
                for v in reader.sequence(value, f"{name}.pytest_args")
            )
        elif key in _STAGE_KEYS or key in _STAGE_OPTIONAL:
            text = reader.string(value, f"{name}.{key}")
            if text is not None and key in allowed and text not in allowed[key]:
                hint = did_you_mean(text, allowed[key])
                reader.add(
                    value, f"{name}.{key} is {text!r}{hint} (allowed: {', '.join(allowed[key])})"
                )
                text = None
            values[key] = text
        else:
            reader.unknown_key(key_node, key, _STAGE_KEYS + _STAGE_OPTIONAL, f"stage {name!r}")
    missing = [k for k in _STAGE_KEYS if k not in values]
    if missing:
        reader.add(name_node, f"stage {name!r} lacks {', '.join(missing)}")
        return None
    if any(v is None for v in values.values()):
        return None
    return Stage(name=name, line=name_node.start_mark.line + 1, **values)  # type: ignore[arg-type]


@dataclass
class StageLists:
    """A ``test-lists/`` directory: ``stages.yml`` plus the test-db files its stages name."""

    directory: Path
    stages: dict[str, Stage]
    dbs: dict[str, TestDb]  # context name -> the file defining it

    @classmethod
    def load(cls, directory: Path) -> StageLists:
        """Parse every list file in ``directory``; all problems of all files in one error."""
        problems: list[Problem] = []
        stages: dict[str, Stage] = {}
        dbs: dict[str, TestDb] = {}
        if not directory.is_dir():
            raise UsageError(f"{directory}: no such directory (give --dir with the test-db lists)")
        stages_path = directory / STAGES_FILE
        if stages_path.is_file():
            try:
                stages = load_stages(stages_path)
            except TestListError as exc:
                problems.extend(exc.problems)
        for path in sorted(directory.glob("*.y*ml")):
            if path.name == STAGES_FILE or path.suffix not in (".yml", ".yaml"):
                continue
            try:
                db = load_test_db(path)
            except TestListError as exc:
                problems.extend(exc.problems)
                continue
            for context in db.contexts:
                if context in dbs:
                    problems.append(
                        Problem(
                            str(path),
                            1,
                            f"context {context!r} is also defined in {dbs[context].path}",
                        )
                    )
                dbs[context] = db
        if problems:
            raise TestListError(problems)
        return cls(directory, stages, dbs)

    def context(self, name: str) -> TestDb:
        """The file defining test-db context ``name``, or a usage error listing the contexts."""
        if name not in self.dbs:
            near = closest(name, self.dbs)
            hint = f"; closest: {', '.join(near)}" if near else ""
            raise UsageError(
                f"no list in {self.directory} defines context {name!r}{hint} "
                f"(contexts: {', '.join(sorted(self.dbs)) or '(none)'})"
            )
        return self.dbs[name]

    def query(self, context: str, facts: dict[str, object], *, exact: bool) -> list[Entry]:
        """What ``trt-test-db --context CONTEXT --match(-exact) FACTS`` would list."""
        return self.context(context).select(context, facts, exact=exact)

    def stage(self, name: str) -> Stage:
        """The named stage, or a usage error listing the closest names."""
        if not self.stages:
            raise UsageError(
                f"{self.directory} has no {STAGES_FILE}, so no stage {name!r}; select with "
                '--context NAME --match \'{"gpu": ..., "system_gpu_count": ...}\' instead'
            )
        if name not in self.stages:
            raise UsageError(unknown_stage_message(name, self.stages, self.directory / STAGES_FILE))
        return self.stages[name]

    def db_for(self, stage: Stage) -> TestDb:
        if stage.test_db not in self.dbs:
            raise UsageError(
                f"stage {stage.name!r} uses test-db context {stage.test_db!r}, which no file in {self.directory} defines"
            )
        return self.dbs[stage.test_db]

    def entries(self, name: str) -> list[Entry]:
        """What stage ``name`` runs."""
        stage = self.stage(name)
        return self.db_for(stage).entries(stage.test_db, stage)

    def overview(self) -> dict[str, object]:
        """Every stage (with its entry count) and every context, as ``testlist show`` lists them."""
        stages = [
            {
                "stage": s.name,
                "test_db": s.test_db,
                "gpu_type": s.gpu_type,
                "gpu_count": s.gpu_count,
                "stage_term": s.stage,
                "backend": s.backend,
                "entries": len(self.entries(s.name)) if s.test_db in self.dbs else 0,
            }
            for s in self.stages.values()
        ]
        contexts = {name: str(db.path) for name, db in sorted(self.dbs.items())}
        return {"stages": stages, "contexts": contexts}

    def consistency_problems(self) -> list[Problem]:
        """Stages naming unknown contexts or selecting nothing; blocks or contexts no stage reaches."""
        problems: list[Problem] = []
        stages_source = str(self.directory / STAGES_FILE)
        for stage in self.stages.values():
            if stage.test_db not in self.dbs:
                hint = did_you_mean(stage.test_db, self.dbs)
                problems.append(
                    Problem(
                        stages_source,
                        stage.line,
                        f"stage {stage.name!r} names test-db context {stage.test_db!r}, which no list file defines{hint}",
                    )
                )
            elif not self.entries(stage.name):
                problems.append(
                    Problem(
                        stages_source,
                        stage.line,
                        f"stage {stage.name!r} selects no tests: no block of {stage.test_db!r} matches its gpu_type/gpu_count/stage/backend",
                    )
                )
        for context, db in self.dbs.items() if self.stages else ():
            users = [s for s in self.stages.values() if s.test_db == context]
            if not users:
                problems.append(
                    Problem(
                        str(db.path), 1, f"context {context!r} is used by no stage in {STAGES_FILE}"
                    )
                )
                continue
            for block in db.contexts[context]:
                if not any(block.condition.matches(s.facts()) for s in users):
                    problems.append(
                        Problem(
                            str(db.path),
                            block.line,
                            f"no stage of {context!r} matches this block's condition (stages: {', '.join(s.name for s in users)})",
                        )
                    )
        return problems


def unknown_stage_message(name: str, stages: Iterable[str], where: Path) -> str:
    names = sorted(stages)
    near = closest(name, names)
    hint = f"; closest: {', '.join(near)}" if near else ""
    return (
        f"unknown stage {name!r}{hint}. Stages defined in {where}: {', '.join(names) or '(none)'}"
    )


def resolve_entries(
    test_list: Path, stage_name: str | None
) -> tuple[list[Entry], Stage | None, str]:
    """What ``--test-list PATH [--stage NAME]`` selects.

    ``PATH`` is a test-db file (``--stage`` is looked up in ``stages.yml`` beside it; without
    ``--stage`` every entry of the file is selected), a plain ``.txt`` list, or a directory
    (``--stage`` required). Returns the entries, the stage, and the file they came from.
    """
    if test_list.is_dir():
        if stage_name is None:
            raise UsageError(f"--test-list {test_list} is a directory: also give --stage NAME")
        lists = StageLists.load(test_list)
        stage = lists.stage(stage_name)
        db = lists.db_for(stage)
        return db.entries(stage.test_db, stage), stage, str(db.path)
    if not test_list.is_file():
        raise UsageError(f"--test-list {test_list}: no such file or directory")
    db = load_test_db(test_list)
    if stage_name is None:
        return db.entries(), None, str(test_list)
    if test_list.suffix == ".txt":
        raise UsageError(
            f"--stage needs a test-db YAML list; {test_list} is a plain list with no conditions"
        )
    stages_path = test_list.parent / STAGES_FILE
    if not stages_path.is_file():
        raise UsageError(f"--stage {stage_name}: no {STAGES_FILE} beside {test_list} to define it")
    stages = load_stages(stages_path)
    if stage_name not in stages:
        raise UsageError(unknown_stage_message(stage_name, stages, stages_path))
    stage = stages[stage_name]
    if stage.test_db not in db.contexts:
        raise UsageError(
            f"stage {stage_name!r} renders context {stage.test_db!r}, which {test_list} does not define (it has: {', '.join(db.contexts)})"
        )
    return db.entries(stage.test_db, stage), stage, str(test_list)
