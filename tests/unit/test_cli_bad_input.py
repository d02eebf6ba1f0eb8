"""Issue 31's bad inputs: each is one stderr line naming the option or file and what to do, exit 2,
nothing written, and found before any probe runs.

Before, each of these ran the probe four times (the endpoint checks) and then said something
indirect, or was accepted (exit 0), or was an internal error (exit 1 and a traceback file).
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from regress.bisect.synthetic import regression_history
from regress.cli import cli

PROBE = 'grep -q "BUG = True" app.py && exit 1\nexit 0\n'


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad-input")
    shas = regression_history(tmp / "repo", 6, 3)
    (tmp / "probe.sh").write_text(PROBE)
    return tmp, shas


def one_line_exit_2(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output and "internal error" not in result.output
    return lines[0]


def bisect(tmp, shas, *extra: str, repo=None, cache=None):
    cache = cache or tmp / "cache-untouched"
    args = ["bisect", "run", "--good", shas[0], "--bad", shas[-1], "--cache-dir", str(cache)]
    return CliRunner().invoke(cli, [*args, "--repo", str(repo or tmp / "repo"), *extra])


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--", "no-such-probe-xyz"], ["the probe command", "'no-such-probe-xyz'", "PATH"]),
        (["--", "/no/such/probe.sh"], ["the probe command", "/no/such/probe.sh", "not exist"]),
        (["--launcher", "no-such-launcher-xyz", "--", "sh", "PROBE"], ["--launcher", "PATH"]),
        (["--probe", "metric", "--metric", "runs[", "--", "sh", "PROBE"], ["--metric", "runs["]),
        (["--jobs", "2", "--gpus", "0,1,2", "--", "sh", "PROBE"], ["--gpus", "--jobs 2"]),
        (["sh", "-x", "PROBE"], ["'-x'", "put `--` before the probe command"]),
    ],
)
def test_bisect_refuses_before_any_probe_runs(history, extra, words):
    tmp, shas = history
    extra = [str(tmp / "probe.sh") if w == "PROBE" else w for w in extra]
    line = one_line_exit_2(bisect(tmp, shas, *extra))
    for word in words:
        assert word in line, line
    assert "last run at" not in line  # no probe ran
    assert not (tmp / "cache-untouched").exists()  # nothing written


def test_a_repository_without_commits_is_said_so(tmp_path):
    from regress.bisect.git import git

    git(["init", "-q", str(tmp_path / "empty")], cwd=tmp_path)
    result = CliRunner().invoke(
        cli, ["bisect", "run", "--good", "HEAD~1", "--repo", str(tmp_path / "empty"), "--", "true"]
    )
    assert "has no commits yet" in one_line_exit_2(result)


def test_a_repository_path_with_a_line_break_is_refused_clearly(history, tmp_path):
    tmp, shas = history
    odd = tmp_path / "a\nb"
    odd.mkdir()
    result = bisect(tmp, shas, "--", "true", repo=odd)
    assert "line break" in one_line_exit_2(result)
