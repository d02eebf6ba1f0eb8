"""What a new user points regress at: bad input is one line and exit 2 with nothing written,
nonsense is refused rather than ignored, and an output path is written, never replaced.

Each case here was an internal error (exit 1 and a traceback file), a silently accepted
option, a three-line click message or a replaced device node before.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest
from _cli import one_line_exit_2
from click.testing import CliRunner

from regress.bisect.config import BisectConfig
from regress.bisect.synthetic import regression_history
from regress.cli import cli
from regress.errors import UsageError

PROBE = 'grep -q "BUG = True" app.py && exit 1\nexit 0\n'


def _regress(*args: str, **popen) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from regress.cli import main; main()", *args],
        env={**os.environ, "REGRESS_TRACEBACK": ""},
        check=False,
        **popen,
    )


@pytest.fixture
def history(tmp_path):
    shas = regression_history(tmp_path / "repo", 8, 5)
    (tmp_path / "probe.sh").write_text(PROBE)
    return tmp_path, shas


def _bisect(tmp, shas, *extra, env=None):
    args = ["bisect", "run", "--good", shas[0], "--bad", shas[-1], "--repo", str(tmp / "repo")]
    return CliRunner(env=env).invoke(cli, [*args, *extra, "--", "sh", str(tmp / "probe.sh")])


# --- output paths: written through, never replaced ----------------------------------------------


def _stdout_twin(tmp_path: Path) -> Path:
    """A link made as /dev/stdout is (to /proc/self/fd/1), in a folder of the test's own.

    The tests write through this twin, never through the real /dev/stdout: run against a
    regress that replaces what it writes (the defect these tests guard), they would turn the
    machine's /dev/stdout into a regular file, as the first version of these tests did.
    """
    twin = tmp_path / "stdout"
    twin.symlink_to("/proc/self/fd/1")
    return twin


def test_dev_stdout_is_written_in_place_not_resolved_to_a_file():
    from regress.files import output_target

    if os.path.islink("/dev/stdout"):  # only read: the real one is never written by the suite
        target, in_place = output_target("/dev/stdout")
        assert in_place and target.parts[:2] == ("/", "proc")


def test_json_to_a_stdout_link_puts_the_json_on_stdout_and_keeps_the_link(tmp_path):
    twin = _stdout_twin(tmp_path)
    done = _regress("defects", "--json", str(twin), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    start = done.stdout.index("[\n")
    doc, _ = json.JSONDecoder().raw_decode(done.stdout[start:])
    assert {d["name"] for d in doc} >= {"stale_req_idx", "unannounced_mtp_shapes"}
    assert twin.is_symlink() and os.readlink(twin) == "/proc/self/fd/1"


def test_json_to_a_stdout_link_appended_to_a_log_keeps_what_the_log_held(tmp_path):
    twin = _stdout_twin(tmp_path)
    log = tmp_path / "nightly.log"
    log.write_text("yesterday's lines\n")
    with open(log, "a") as out:
        done = _regress("defects", "--json", str(twin), stdout=out, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith("yesterday's lines\n") and '"stale_req_idx"' in text
    assert twin.is_symlink()


def test_json_to_a_fifo_reaches_its_reader_and_the_fifo_stays(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    done = _regress("defects", "--json", str(fifo), capture_output=True)
    out, _ = reader.communicate(timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(out)[0]["name"] == "stale_req_idx"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_json_to_a_full_device_is_exit_2_and_the_device_stays(tmp_path):
    full = tmp_path / "full"
    try:
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except OSError as exc:
        pytest.skip(f"cannot make a device node here ({exc})")
    result = CliRunner().invoke(cli, ["defects", "--json", str(full)])
    line = one_line_exit_2(result)
    assert line.startswith(f"regress: error: --json {full}: cannot write (No space left")
    assert stat.S_ISCHR(os.stat(full).st_mode)


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc")
def test_accept_json_under_proc_is_refused_before_the_run(monkeypatch):
    import regress.acceptance.profile as profile

    monkeypatch.setattr(profile, "profile", lambda *a, **k: pytest.fail("the run started"))
    result = CliRunner().invoke(cli, ["accept", "--json", "/proc/regress-report.json"])
    assert "--json /proc/regress-report.json" in one_line_exit_2(result)


def test_stdout_on_a_full_device_is_one_line_and_exit_2():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        done = _regress("defects", stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "regress: error: cannot write to standard output (No space left on device); free space "
        "on its device or redirect it elsewhere"
    ]


# --- bad input: one line naming the option, exit 2, nothing written ------------------------------


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_cache_dir_that_is_a_file_is_bad_input(history, how):
    tmp, shas = history
    (tmp / "afile").write_text("mine\n")
    if how == "option":
        result = _bisect(tmp, shas, "--cache-dir", str(tmp / "afile"))
        named = f"--cache-dir {tmp / 'afile'}"
    else:
        result = _bisect(tmp, shas, env={"REGRESS_CACHE_DIR": str(tmp / "afile")})
        named = f"REGRESS_CACHE_DIR={tmp / 'afile'}"
    line = one_line_exit_2(result)
    assert line.startswith(f"regress: error: {named}: cannot write the bisect cache (Not a dir")
    assert (tmp / "afile").read_text() == "mine\n"


@pytest.mark.parametrize(
    ("code", "words"),
    [(errno.EROFS, "Read-only file system"), (errno.ENOSPC, "No space left on device")],
)
def test_a_read_only_or_full_cache_is_bad_input_and_leaves_no_lone_lock(
    history, monkeypatch, code, words
):
    import regress.files as files

    tmp, shas = history

    def fail(*args, **kwargs):  # the first write of the session record
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(files.tempfile, "mkstemp", fail)
    result = _bisect(tmp, shas, "--cache-dir", str(tmp / "cache"))
    line = one_line_exit_2(result)
    assert f"--cache-dir {tmp / 'cache'}: cannot write the bisect cache ({words}" in line
    assert not (tmp / "cache").exists()  # made by this run, so removed with its lock file


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("k:\n  - 1\n  - 2\n", "baseline entry 'k' in B is a list, not a mapping"),
        ("k: 3\n", "baseline entry 'k' in B is a int, not a mapping"),
        ("k:\n  min_al: abc\n", "baseline entry 'k' in B: min_al is 'abc'; give a number"),
        ("k: [1,\n  a: b\n", "baseline B is not valid YAML (line 3, column 1: expected ','"),
    ],
)
def test_a_baseline_entry_that_is_no_entry_is_one_line(tmp_path, monkeypatch, text, message):
    import regress.acceptance.profile as profile

    monkeypatch.setattr(profile, "_measure", lambda *a, **k: pytest.fail("the run started"))
    baseline = tmp_path / "b.yaml"
    baseline.write_text(text)
    result = CliRunner().invoke(cli, ["accept", "--baseline", f"{baseline}#k"])
    assert message.replace("B", str(baseline)) in one_line_exit_2(result)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["trend", "check", "--alpha", "nan"],
            "Invalid value for '--alpha': 'nan' is not a finite",
        ),
        (["trend", "check", "--min-change", "nan"], "'--min-change': 'nan' is not a finite"),
        (["accept", "--tolerance", "nan"], "'--tolerance': 'nan' is not a finite"),
        (["accept", "--batch-sizes", "1,2,"], "'1,2,' has an empty item"),
        (["accept", "--batch-sizes", "1,,8"], "'1,,8' has an empty item"),
        (["check", "--trtllm-src", ".", "--sm", "-1"], "'--sm': -1 is not in the range 70<=x<=199"),
        (["bisect", "run", "--good", "A", "--confidence", "nan", "--", "x"], "not a finite"),
        (["bisect", "run", "--good", "A", "--timeout", "inf", "--", "x"], "not a finite"),
    ],
)
def test_a_number_that_is_no_number_is_one_line(argv, words):
    line = one_line_exit_2(CliRunner().invoke(cli, argv))
    assert words in line and line.startswith("regress: error: ")


def test_a_binary_parsed_bot_file_is_one_line(tmp_path):
    (tmp_path / "bin").write_bytes(bytes(range(128, 256)))
    result = CliRunner().invoke(cli, ["bot", "plan", "--parsed", str(tmp_path / "bin")])
    assert "--parsed" in one_line_exit_2(result) and "not UTF-8 text" in result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["--bogus"],
        ["nosuch"],
        ["bisect", "run"],
        ["bisect", "run", "--good", "A", "--jobs", "x"],
        ["bisect", "run", "--good", "A", "--probe", "nosuch"],
        ["accept", "--engine", "nosuch"],
        ["accept", "--max-draft-len", "0"],
        ["demo", "--commits", "1"],
        ["demo", "extra"],
        ["trend", "check", "--min-nights", "1"],
        ["junit", "merge"],
        ["testlist", "show", "--bogus"],
        ["bot", "plan", "--parsed", "/nonexistent/x.json"],
        ["check"],
    ],
)
def test_click_usage_errors_are_one_line(argv, monkeypatch):
    monkeypatch.delenv("REGRESS_TRTLLM_SRC", raising=False)
    line = one_line_exit_2(CliRunner().invoke(cli, argv))
    assert line.startswith("regress: error: ") and "--help`)" in line


def test_the_one_line_form_is_also_what_the_console_script_prints():
    done = _regress("bisect", "run", capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "regress: error: bisect run: Missing option '--good' (see `regress bisect run --help`)"
    ]


# --- nonsense: refused, never silently ignored ---------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"options": {"wheel": "x.whl"}}, "--wheel is read only by --recipe trtllm-precompiled"),
        (
            {"recipe": "trtllm", "options": {"wheel": "x.whl"}},
            "--wheel is read only by --recipe trtllm-precompiled; with --recipe trtllm",
        ),
        (
            {"probe": "metric", "metric": "a", "crash_is_bad": True},
            "--crash-is-bad is read only by --probe exit-code; with --probe metric",
        ),
        ({"options": {"signature": "X"}}, "--signature is read only by --probe assert"),
        ({"metric": "runs[0].al"}, "--metric is read only by --probe metric"),
        ({"threshold": 1.0}, "--threshold is read only by --probe metric"),
        ({"metric_runs": (4, 1, 4)}, "--metric-runs is read only by --probe metric"),
        ({"jobs": 10**12}, f"--jobs {10**12}: this machine gives regress"),
    ],
)
def test_an_option_the_chosen_probe_would_ignore_is_refused(fields, message):
    with pytest.raises(UsageError) as caught:
        BisectConfig(good="A", bad="B", command=["x"], **fields)
    assert message in str(caught.value)


def test_jobs_up_to_the_cpus_or_behind_a_launcher_are_fine():
    from regress.bisect.config import available_cpus

    BisectConfig(good="A", bad="B", command=["x"], jobs=available_cpus())
    BisectConfig(good="A", bad="B", command=["x"], jobs=10**6, launcher=["srun"])


# --- help and notes, said once and right ---------------------------------------------------------


def _commands(group: click.Group, ctx: click.Context, path: list[str]):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands(command, ctx, [*path, name])
        elif command is not None:
            yield [*path, name], command


def test_every_json_option_says_file_or_stdout():
    ctx = click.Context(cli)
    seen = 0
    for path, command in _commands(cli, ctx, ["regress"]):
        for param in command.params:
            if isinstance(param, click.Option) and "--json" in param.opts:
                assert param.metavar == "FILE|-", " ".join(path)
                seen += 1
    assert seen >= 9


def test_top_level_help_lists_every_commands_exit_codes():
    from regress.errors import EXIT_CODES

    shown = " ".join(CliRunner().invoke(cli, ["--help"]).output.split())
    for codes in EXIT_CODES.values():
        for code, meaning in codes.items():
            assert f"{code} {' '.join(meaning.split())}" in shown
    assert "2 not a TensorRT-LLM tree; 3 no verdict (the tree cannot be loaded" in shown
    # wrapped for a terminal (issue 31: rows of 218 characters)
    assert max(map(len, CliRunner().invoke(cli, ["--help"]).output.splitlines())) < 100


def test_the_bisect_notes_and_warnings_are_said_once(history):
    tmp, shas = history
    result = _bisect(tmp, shas, "--cache-dir", str(tmp / "c"), "--jobs", "9", "--launcher", "env")
    assert result.exit_code == 0, result.output
    both = result.stdout + result.stderr
    assert both.count("searched the linear history") == 1
    assert both.count("--jobs 9 capped to") == 1


def test_folder_and_file_options_follow_one_naming_rule():
    """Issue 31: folders were `--store TEXT`, `--dir DIRECTORY`, `--workdir DIRECTORY`, ... ."""
    ctx = click.Context(cli)
    folders = {"--repo", "--store", "--dir", "--root", "--test-lists", "--workdir", "--cache-dir"}
    wrong = []

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])
            return
        if path == ["check"]:  # its options are another change's (issue 31 lists them apart)
            return
        for p in cmd.params:
            if not isinstance(p, click.Option) or p.is_flag:
                continue
            metavar = p.make_metavar(ctx)
            if p.opts[-1] in folders or (isinstance(p.type, click.Path) and not p.type.file_okay):
                expected = {"DIR"}
            elif isinstance(p.type, click.Path) or p.opts[-1] in ("--json", "--plot", "--output"):
                expected = {"FILE", "FILE|-"}
            else:
                continue
            if metavar not in expected:
                wrong.append(f"{' '.join(path)} {p.opts[-1]} {metavar}")

    walk(cli, [])
    assert wrong == []
