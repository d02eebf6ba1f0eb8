"""Issue 31's bad inputs: each is one stderr line naming the option or file and what to do, exit 2,
nothing written, and found before any probe runs.

Before, each of these ran the probe four times (the endpoint checks) and then said something
indirect, or was accepted (exit 0), or was an internal error (exit 1 and a traceback file).
"""

from __future__ import annotations

import pytest
from _cli import one_line_exit_2
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
        (["--recipe", "trtllm-source"], ["--recipe trtllm-source", "not a TensorRT-LLM checkout"]),
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


# --- damaged stored files: one line naming the file and `regress bisect reset` ------------------

DAMAGE = {
    "cut": b'{"schema": 1, "sta',
    "empty": b"",
    "list": b"[1, 2]\n",
    "binary": bytes(range(0x80, 0xFF)),
    "no-runs": b'{"schema": 1, "key": "k", "config": {}, "runs": [{"x": 1}]}\n',
}


@pytest.fixture(scope="module")
def finished(history, tmp_path_factory):
    tmp, shas = history
    cache = tmp_path_factory.mktemp("finished-cache")
    result = bisect(tmp, shas, "-q", "--", "sh", str(tmp / "probe.sh"), cache=cache)
    assert result.exit_code == 0, result.output
    return tmp, cache


@pytest.mark.parametrize("command", ["status", "log"])
@pytest.mark.parametrize("which", ["session.json", "results"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_session_or_results_file_is_one_line(finished, tmp_path, command, which, damage):
    import shutil

    tmp, cache = finished
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    (root,) = (copy / "bisect").iterdir()
    target = root / which if which == "session.json" else next((root / "results").iterdir())
    target.write_bytes(DAMAGE[damage])
    args = ["bisect", command, "--repo", str(tmp / "repo"), "--cache-dir", str(copy)]
    line = one_line_exit_2(CliRunner().invoke(cli, args))
    assert str(target) in line and "damaged" in line and "regress bisect reset" in line, line
    reset = ["bisect", "reset", "--repo", str(tmp / "repo"), "--cache-dir", str(copy)]
    assert CliRunner().invoke(cli, reset).exit_code == 0  # the way out works
    assert not target.exists()


def test_testlist_show_on_an_empty_folder_says_there_is_nothing(tmp_path):
    result = CliRunner().invoke(cli, ["testlist", "show", "--dir", str(tmp_path)])
    line = one_line_exit_2(result)
    assert f"--dir {tmp_path}" in line and "no test lists" in line


def test_a_failing_metric_probe_reports_its_exit_and_last_stderr_line(history, tmp_path):
    import sys

    tmp, shas = history
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys\nprint('Traceback (most recent call last):', file=sys.stderr)\n"
        "print(\"ModuleNotFoundError: No module named 'tensorrt_llm'\", file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    cache = tmp_path / "cache"
    args = ["--probe", "metric", "--metric", "runs[1].acceptance_length", "--metric-runs", "2,1,2"]
    result = bisect(tmp, shas, "-q", *args, "--", sys.executable, str(probe), cache=cache)
    line = one_line_exit_2(result)
    assert "exit 3" in line, line
    assert "ModuleNotFoundError: No module named 'tensorrt_llm'" in line
    assert "check --metric" not in line


@pytest.mark.parametrize("content", [None, bytes(range(0x80, 0xFF))])
def test_an_unreadable_allow_list_is_said_in_words_not_python_texts(tmp_path, content):
    allow = tmp_path / "allow.txt"
    if content is not None:
        allow.write_bytes(content)
    args = ["bot", "parse", "/bot run", "--author", "alice", "--allow", str(allow)]
    line = one_line_exit_2(CliRunner().invoke(cli, args))
    assert str(allow) in line and "--allow FILE" in line
    assert "[Errno" not in line and "codec" not in line, line
