"""Checking stage lists and waives against the repository: paths on disk, ids pytest collects.

A list naming a test that was renamed away is the classic silent CI gap: the stage goes green
because the test no longer runs. Upstream checks this in a Jenkins "Check Test List" stage; here
``regress testlist validate`` does it with one ``pytest --collect-only -q`` over the files the
node-id entries name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from regress.ci.selection import select, suggestions
from regress.ci.stages import WAIVES_FILE, StageLists
from regress.ci.testlist import Entry, TestListError
from regress.ci.waives import load_waives
from regress.ci.yamlnodes import Problem, closest
from regress.processes import run_child

# The one seam to subprocesses here: (argv, cwd) -> (exit code, combined output).
RunProcess = Callable[[Sequence[str], Path], "tuple[int, str]"]


def run_process(argv: Sequence[str], cwd: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = run_child(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    return done.returncode, done.stdout + done.stderr


@dataclass
class Collected:
    """Node ids ``pytest --collect-only -q`` printed, and the files it failed to collect."""

    ids: list[str] = field(default_factory=list)
    broken: dict[str, str] = field(default_factory=dict)  # path -> first error line
    failure: str | None = None  # pytest itself failed (usage error, crash)


def parse_collect_output(returncode: int, output: str) -> Collected:
    """Read ``-q`` output: ids up to the first blank line, ``ERROR path`` lines in the summary."""
    collected = Collected()
    lines = output.splitlines()
    for line in lines:
        if not line.strip():
            break
        if "::" in line:
            collected.ids.append(line.strip())
    in_summary = False
    for line in lines:
        if "short test summary info" in line:
            in_summary = True
        elif in_summary and line.startswith("ERROR "):
            path, _, why = line[len("ERROR ") :].partition(" - ")
            collected.broken[path.strip()] = why.strip() or "collection error"
    if returncode not in (0, 1, 2, 5):
        tail = " | ".join(lines[-5:])
        collected.failure = f"pytest --collect-only exited {returncode}: {tail}"
    return collected


def collect_node_ids(
    paths: Sequence[str], *, root: Path, python: str = sys.executable, run: RunProcess = run_process
) -> Collected:
    """Collect (never run) the tests under ``paths``, relative to ``root``."""
    if not paths:
        return Collected()
    argv = [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths]
    return parse_collect_output(*run(argv, root))


def _missing_path_problem(source: str, line: int, path: str, root: Path) -> Problem:
    parent = (root / path).parent
    near: list[str] = []
    if parent.is_dir():
        siblings = [p.relative_to(root).as_posix() for p in parent.iterdir()]
        near = closest(path, siblings)
    hint = f"; closest: {', '.join(near)}" if near else ""
    return Problem(source, line, f"{path} does not exist under {root}{hint}")


def validate(
    directory: Path,
    *,
    root: Path,
    waives: Path | None = None,
    collect: bool = True,
    paths: bool = True,
    run: RunProcess = run_process,
) -> list[Problem]:
    """Every problem with the lists in ``directory`` (and the waive file), or ``[]``.

    Checks: the grammar of every list and waive line (file:line), stage/context consistency when
    there is a ``stages.yml``, and unless ``paths`` is False (upstream's folder, checked outside
    its repository) that every entry's path exists under ``root`` and, with ``collect``, that every
    node-id entry and waive names at least one test pytest collects.
    """
    try:
        lists = StageLists.load(directory)
    except TestListError as exc:
        return list(exc.problems)
    problems = lists.consistency_problems()
    items = [
        (entry.source, entry.line, entry.test_id)
        for db in {id(db): db for db in lists.dbs.values()}.values()
        for blocks in db.contexts.values()
        for block in blocks
        for entry in block.entries
    ]
    waive_file = waives if waives is not None else directory / WAIVES_FILE
    if waive_file.is_file():
        try:
            items += [(w.source, w.line, w.test_id) for w in load_waives(waive_file)]
        except TestListError as exc:
            problems.extend(exc.problems)
    elif waives is not None:
        problems.append(Problem(str(waives), 1, "waive file not found"))
    if not paths:
        return sorted(problems, key=lambda p: (p.source, p.line))
    node_items = []
    for source, line, test_id in dict.fromkeys(items):
        path = test_id.split("::", 1)[0]
        if not (root / path).exists():
            problems.append(_missing_path_problem(source, line, path, root))
        elif "::" in test_id:
            node_items.append((source, line, test_id, path))
    if collect and node_items:
        paths = sorted({path for *_, path in node_items})
        collected = collect_node_ids(paths, root=root, run=run)
        if collected.failure:
            problems.append(Problem(str(directory), 1, collected.failure))
        for source, line, test_id, path in node_items:
            if path in collected.broken:
                why = collected.broken[path]
                problems.append(Problem(source, line, f"pytest cannot collect {path}: {why}"))
                continue
            if select([Entry(test_id, None, source, line)], collected.ids).unmatched:
                near = suggestions(test_id, collected.ids)
                hint = f"; closest collected: {', '.join(near)}" if near else ""
                problems.append(Problem(source, line, f"{test_id!r} is not collected{hint}"))
    return sorted(problems, key=lambda p: (p.source, p.line))
