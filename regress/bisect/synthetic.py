"""Throwaway linear git histories for tests, benchmarks and demos of the bisect.

A history is a list of commits, each a mapping of file paths to new contents. Commits are made with
a fixed author and dates, so the same history always has the same shas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from regress.bisect.git import git

AUTHOR = ("Regress Bot", "bot@regress.invalid")


def write_history(
    path: Path,
    commits: Sequence[Mapping[str, str]],
    *,
    subjects: Sequence[str] | None = None,
    executable: Sequence[str] = (),
) -> list[str]:
    """Create a git repository at ``path`` with one commit per mapping; return the shas in order.

    Args:
        path: a directory that does not exist yet or is empty.
        commits: per commit, the files it writes (path -> content); ``None``-free, never deletes.
        subjects: commit subjects (default ``commit <i>``).
        executable: files to mark executable (probe scripts).
    """
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "--quiet", "--initial-branch=main")
    shas = []
    for i, files in enumerate(commits):
        for name, content in files.items():
            target = path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            if name in executable:
                target.chmod(0o755)
        _git(path, "add", "--all")
        subject = subjects[i] if subjects else f"commit {i}"
        date = f"@{1_700_000_000 + 60 * i} +0000"
        _git(path, "commit", "--quiet", "--allow-empty", "-m", subject, date=date)
        shas.append(_git(path, "rev-parse", "HEAD"))
    return shas


def _git(path: Path, *args: str, date: str | None = None) -> str:
    env = {
        "GIT_AUTHOR_NAME": AUTHOR[0],
        "GIT_AUTHOR_EMAIL": AUTHOR[1],
        "GIT_COMMITTER_NAME": AUTHOR[0],
        "GIT_COMMITTER_EMAIL": AUTHOR[1],
    }
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    config = ["-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"]
    return git([*config, *args], cwd=path, env=env).stdout.strip()


def regression_history(path: Path, n: int, culprit: int, *, fix: int | None = None) -> list[str]:
    """A linear history of ``n + 1`` commits where commit ``culprit`` plants a bug.

    Commit 0 writes ``app.py`` with ``BUG = False``; commit ``culprit`` (1..n) flips it to
    ``True``; commit ``fix`` (after ``culprit``) flips it back; every other commit only edits
    ``notes.txt``. A probe checks ``grep -q "BUG = True" app.py``.

    Returns:
        The shas, oldest first: ``shas[0]`` is good, ``shas[n]`` the head.
    """
    if not 1 <= culprit <= n or (fix is not None and not culprit < fix <= n):
        raise ValueError("need 1 <= culprit < fix <= n")
    commits: list[dict[str, str]] = []
    subjects = []
    for i in range(n + 1):
        files = {"notes.txt": f"note {i}\n"}
        if i == 0:
            files["app.py"] = "BUG = False\n"
            subjects.append("initial commit")
        elif i == culprit:
            files["app.py"] = "BUG = True\n"
            subjects.append(f"refactor the map refresh ({i})")
        elif i == fix:
            files["app.py"] = "BUG = False\n"
            subjects.append(f"restore the map refresh ({i})")
        else:
            subjects.append(f"harmless edit {i}")
        commits.append(files)
    return write_history(path, commits, subjects=subjects)


def merge_history(
    path: Path, steps: int, *, seed: int = 0, culprit_in_branch: bool = True
) -> tuple[list[str], str]:
    """A merge-heavy history: branches of 1-6 commits forked from recent mainline commits and
    merged back with ``--no-ff``, between direct mainline commits, at random.

    One commit (inside a branch when ``culprit_in_branch``, else on the mainline) flips
    ``BUG = False`` to ``True`` in ``app.py``; nothing else touches that file, so a commit is bad
    exactly when the culprit is one of its ancestors, and every merge is clean.

    Returns:
        ``(shas, culprit)``: every commit in creation order (``shas[0]`` the root, ``shas[-1]`` the
        head of ``main``) and the culprit's sha.
    """
    import random

    rnd = random.Random(seed)
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "--quiet", "--initial-branch=main")
    clock = [0]
    shas: list[str] = []

    def commit(files: Mapping[str, str], subject: str) -> str:
        for name, content in files.items():
            (path / name).write_text(content)
        _git(path, "add", "--all")
        clock[0] += 1
        _git(
            path, "commit", "--quiet", "-m", subject, date=f"@{1_700_000_000 + 60 * clock[0]} +0000"
        )
        shas.append(_git(path, "rev-parse", "HEAD"))
        return shas[-1]

    commit({"app.py": "BUG = False\n", "notes.txt": "root\n"}, "initial commit")
    mainline = [shas[0]]
    plan = ["branch" if rnd.random() < 0.6 else "direct" for _ in range(steps)]
    candidates = [i for i, kind in enumerate(plan) if (kind == "branch") == culprit_in_branch]
    at = rnd.choice(candidates or [0])
    culprit = ""
    for step, kind in enumerate(plan):
        plant = step == at
        if kind == "direct":
            files = {"notes.txt": f"main {step}\n"}
            if plant:
                files["app.py"] = "BUG = True\n"
            sha = commit(files, f"main: step {step}")
            culprit = sha if plant else culprit
            mainline.append(sha)
            continue
        base = mainline[-1 - rnd.randrange(min(3, len(mainline)))]
        name = f"topic-{step}"
        _git(path, "checkout", "--quiet", "-b", name, base)
        size = rnd.randint(1, 6)
        flip = rnd.randrange(size) if plant else -1
        for k in range(size):
            files = {f"{name}.txt": f"{name} {k}\n"}
            if k == flip:
                files["app.py"] = "BUG = True\n"
            sha = commit(files, f"{name}: change {k}")
            culprit = sha if k == flip else culprit
        _git(path, "checkout", "--quiet", "main")
        clock[0] += 1
        _git(
            path,
            "merge",
            "--quiet",
            "--no-ff",
            "-m",
            f"Merge {name}",
            name,
            date=f"@{1_700_000_000 + 60 * clock[0]} +0000",
        )
        shas.append(_git(path, "rev-parse", "HEAD"))
        mainline.append(shas[-1])
    return shas, culprit


def interleaved_history(path: Path, steps: int, *, seed: int = 0) -> tuple[list[str], str]:
    """A merge history whose topic branches are developed side by side, as on a busy project.

    Each step, at random: opens a branch from the tip of ``main``, adds a commit to an open branch
    (so commits of different branches alternate in time), commits on ``main`` directly, or merges
    an open branch with ``--no-ff``; branches still open at the end are merged last. Unlike
    :func:`merge_history`, a branch's commits are not contiguous in time, so ``git rev-list
    --topo-order`` (each branch together) and ``--date-order`` (by commit date) differ. One branch
    commit flips ``BUG = False`` to ``True`` in ``app.py``, as in :func:`merge_history`.

    Returns:
        ``(shas, culprit)``: every commit in creation order (``shas[0]`` the root, ``shas[-1]`` the
        head of ``main``) and the culprit's sha.
    """
    import random

    rnd = random.Random(seed)
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "--quiet", "--initial-branch=main")
    shas: list[str] = []

    def stamp() -> str:
        return f"@{1_700_000_000 + 60 * len(shas)} +0000"

    def commit(files: Mapping[str, str], subject: str) -> None:
        for name, content in files.items():
            (path / name).write_text(content)
        _git(path, "add", "--all")
        _git(path, "commit", "--quiet", "-m", subject, date=stamp())
        shas.append(_git(path, "rev-parse", "HEAD"))

    def merge(name: str) -> None:
        _git(path, "merge", "--quiet", "--no-ff", "-m", f"Merge {name}", name, date=stamp())
        shas.append(_git(path, "rev-parse", "HEAD"))

    commit({"app.py": "BUG = False\n", "notes.txt": "root\n"}, "initial commit")
    plant = rnd.randrange(steps // 4, steps // 2)  # the first branch commit from this step on
    culprit = ""
    branches: list[str] = []
    for step in range(steps):
        roll = rnd.random()
        if roll < 0.3 or not branches:
            name = f"topic-{step}"
            _git(path, "branch", name, "main")
            branches.append(name)
        if roll < 0.7:
            name = rnd.choice(branches)
            _git(path, "checkout", "--quiet", name)
            files = {f"{name}.txt": f"{name} {step}\n"}
            if step >= plant and not culprit:
                files["app.py"] = "BUG = True\n"
            commit(files, f"{name}: change {step}")
            culprit = culprit or (shas[-1] if "app.py" in files else "")
            _git(path, "checkout", "--quiet", "main")
        elif roll < 0.85:
            commit({"notes.txt": f"main {step}\n"}, f"main: step {step}")
        else:
            merge(branches.pop(rnd.randrange(len(branches))))
    if not culprit:  # no branch commit came after the planting step: add one
        name = f"topic-{steps}"
        _git(path, "checkout", "--quiet", "-b", name, "main")
        commit({"app.py": "BUG = True\n"}, f"{name}: change {steps}")
        culprit = shas[-1]
        _git(path, "checkout", "--quiet", "main")
        branches.append(name)
    for name in branches:
        merge(name)
    return shas, culprit
