"""End-to-end bisects of real temporary repositories: results, hygiene, bad input, resume, jobs."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from regress.bisect.git import git
from regress.bisect.search import EndpointError
from regress.bisect.session import BisectConfig, bisect_log, bisect_reset, bisect_status, run_bisect
from regress.bisect.store import locked
from regress.bisect.synthetic import regression_history, write_history
from regress.errors import RegressError, UsageError

PROBE = 'echo "$REGRESS_COMMIT|$REGRESS_JOB|${CUDA_VISIBLE_DEVICES:-}|$REGRESS_WORKTREE" >> "$PROBE_LOG"\n'
PROBE += 'grep -q "BUG = True" app.py && exit 1\nexit 0\n'


def snapshot(repo: Path) -> tuple[dict[str, str], dict[str, bytes]]:
    """Every file of the repository, .git included, so any change at all shows up."""
    meta = {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((repo / ".git").rglob("*"))
        if p.is_file()
    }
    work = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    return meta, work


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The 16-commit history (bug planted at 11) of ``repo``, written once for the module's
    twenty tests: a copy of it costs a sixth of the CPU of writing it again (0.03 s, 0.19 s)."""
    path = tmp_path_factory.mktemp("history") / "repo"
    return path, regression_history(path, 16, 11)


@pytest.fixture
def repo(tmp_path, history):
    """A 16-commit history (bug planted at 11), checked out on a branch with local changes."""
    path = tmp_path / "repo"
    shutil.copytree(history[0], path, symlinks=True)
    shas = list(history[1])
    git(["checkout", "-q", "-b", "feature", shas[5]], cwd=path)
    (path / "notes.txt").write_text("dirty, unstaged\n")
    (path / "staged.txt").write_text("staged\n")
    git(["add", "staged.txt"], cwd=path)
    (path / "untracked.txt").write_text("untracked\n")
    probe = tmp_path / "probe.sh"
    probe.write_text(PROBE)
    return path, shas, tmp_path


def config(path, shas, tmp, good=0, bad=16, **kw):
    kw.setdefault("command", ["sh", str(tmp / "probe.sh")])
    env = {"PROBE_LOG": str(tmp / "probe.log"), **kw.pop("env", {})}
    return BisectConfig(
        good=shas[good], bad=shas[bad], repo=str(path), cache_dir=str(tmp / "cache"), env=env, **kw
    )


def probe_log(tmp) -> list[list[str]]:
    log = tmp / "probe.log"
    return [line.split("|") for line in log.read_text().splitlines()] if log.exists() else []


def test_finds_culprit_without_touching_the_users_repository(repo):
    path, shas, tmp = repo
    before = snapshot(path)
    events = []
    result = run_bisect(config(path, shas, tmp), progress=events.append)
    assert result.status == "found" and result.exit_code == 0
    assert result.culprit.sha == shas[11]
    assert result.culprit.subject == "refactor the map refresh (11)"
    assert "app.py" in result.culprit.diffstat
    assert result.probes == len(probe_log(tmp)) <= 2 + 4 + 1
    assert snapshot(path) == before
    assert git(["worktree", "list"], cwd=path).stdout.count("\n") == 1
    assert not (Path(result_root(tmp)) / "slots").exists()  # private clones removed
    steps = [e for e in events if e.kind == "step"]
    assert steps[0].message == "endpoint check" and steps[-1].mass == 1.0
    assert all(e.elapsed >= 0 and e.candidates >= 1 for e in steps)
    assert all(line[3].startswith(str(tmp / "cache")) for line in probe_log(tmp))


def result_root(tmp) -> Path:
    (root,) = (tmp / "cache" / "bisect").iterdir()
    return root


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"good": "no-such-rev"}, "unknown revision 'no-such-rev' for --good"),
        ({"bad": "0" * 40}, "unknown revision"),
        ({"good": 16, "bad": 16}, "same commit"),
        ({"good": 12, "bad": 3}, "add --find-fix"),
        ({"repo": "not-a-repo"}, "not a git repository"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(repo, change, match):
    path, shas, tmp = repo
    (tmp / "not-a-repo").mkdir()
    before = snapshot(path)
    cfg = config(path, shas, tmp)
    for key, value in change.items():
        if key == "repo":
            cfg.repo = str(tmp / value)
        else:
            setattr(cfg, key, shas[value] if isinstance(value, int) else value)
    with pytest.raises(UsageError, match=match) as err:
        run_bisect(cfg)
    assert err.value.exit_code == 2
    assert snapshot(path) == before
    assert not (tmp / "cache").exists()
    assert not probe_log(tmp)


def test_endpoint_that_does_not_fail_is_an_input_error(repo):
    path, shas, tmp = repo
    with pytest.raises(EndpointError, match="bad endpoint does not fail") as err:
        run_bisect(config(path, shas, tmp, bad=10))  # 10 is before the bug
    assert err.value.exit_code == 2


def test_find_fix_swaps_the_terms(tmp_path):
    shas = regression_history(tmp_path / "r", 12, 3, fix=9)
    (tmp_path / "probe.sh").write_text(PROBE)
    cfg = config(tmp_path / "r", shas, tmp_path, good=12, bad=4, find_fix=True)
    result = run_bisect(cfg)
    assert result.culprit.sha == shas[9] and result.find_fix
    assert result.to_json()["kind"] == "fix"


def test_resume_repeats_no_decided_probe(repo):
    path, shas, tmp = repo
    first = run_bisect(config(path, shas, tmp, max_probes=3))
    assert first.status == "inconclusive" and first.exit_code == 3
    ran_before = len(probe_log(tmp))
    assert ran_before == 3
    state = bisect_status(str(path), str(tmp / "cache"))
    assert state["session"] == "inconclusive"
    second = run_bisect(config(path, shas, tmp))
    assert second.culprit.sha == shas[11]
    assert second.cached == 3
    commits = [line[0] for line in probe_log(tmp)]
    assert len(commits) == second.probes  # every run happened once, across both sessions
    runs = bisect_log(str(path), str(tmp / "cache"))
    assert [r["commit"] for r in runs] == commits
    assert "found" in bisect_status(str(path), str(tmp / "cache"))["text"]
    third = run_bisect(config(path, shas, tmp))  # all from the store: nothing runs
    assert third.cached == third.probes and len(probe_log(tmp)) == len(commits)
    assert "removed" in bisect_reset(str(path), str(tmp / "cache"))
    with pytest.raises(UsageError, match="no bisect has run"):
        bisect_status(str(path), str(tmp / "cache"))


def test_no_cache_reads_and_writes_nothing(repo):
    path, shas, tmp = repo
    run_bisect(config(path, shas, tmp))
    n = len(probe_log(tmp))
    result = run_bisect(config(path, shas, tmp, use_cache=False))
    assert result.cached == 0 and len(probe_log(tmp)) == 2 * n


def test_a_changed_probe_is_a_new_configuration(repo):
    path, shas, tmp = repo
    run_bisect(config(path, shas, tmp))
    other = run_bisect(config(path, shas, tmp, command=["sh", str(tmp / "probe.sh"), "x"]))
    assert other.cached == 0


def test_second_bisect_on_the_same_cache_is_refused(repo):
    path, shas, tmp = repo
    from regress.bisect.git import open_repo
    from regress.bisect.history import cache_root

    root = cache_root(open_repo(path), str(tmp / "cache"))
    with locked(root), pytest.raises(RegressError, match="another regress bisect") as err:
        run_bisect(config(path, shas, tmp))
    assert err.value.exit_code == 2


def test_parallel_jobs_pin_one_gpu_each(repo):
    path, shas, tmp = repo
    result = run_bisect(config(path, shas, tmp, jobs=2, gpus=["3", "5"]))
    assert result.culprit.sha == shas[11]
    seen = {(job, gpu) for _, job, gpu, _ in probe_log(tmp)}
    assert seen == {("0", "3"), ("1", "5")}
    worktrees = {job: wt for _, job, _, wt in probe_log(tmp)}
    assert worktrees["0"] != worktrees["1"]


def test_launcher_prefixes_every_build_and_probe(repo):
    path, shas, tmp = repo
    wrapper = tmp / "launch.sh"
    wrapper.write_text('#!/bin/sh\necho "$@" >> "$LAUNCH_LOG"\nshift\nexec "$@"\n')
    wrapper.chmod(0o755)
    cfg = config(
        path,
        shas,
        tmp,
        launcher=[str(wrapper), "--gpus=1"],
        build="true",
        env={"LAUNCH_LOG": str(tmp / "launch.log")},
    )
    result = run_bisect(cfg)
    assert result.culprit.sha == shas[11]
    lines = (tmp / "launch.log").read_text().splitlines()
    builds = [x for x in lines if x == "--gpus=1 sh -c true"]
    probes = [x for x in lines if x == f"--gpus=1 sh {tmp / 'probe.sh'}"]
    assert len(builds) == len(probes) == result.probes and len(lines) == 2 * result.probes


def test_failing_build_is_a_skip_and_never_blamed(tmp_path):
    # commits 4..9 do not build; the bug lands at 7, inside the broken stretch
    commits = [
        {"app.py": f"BUG = {i >= 7}\n", "broken": "yes" if 4 <= i <= 9 else "no"} for i in range(17)
    ]
    shas = write_history(tmp_path / "r", commits)
    (tmp_path / "probe.sh").write_text(PROBE)
    cfg = config(tmp_path / "r", shas, tmp_path, build="grep -q no broken")
    result = run_bisect(cfg)
    assert result.status == "ambiguous" and result.exit_code == 3
    assert [c.sha for c in result.candidates] == shas[4:11]  # 3 passes, 10 fails
    reasons = {r for s in result.steps for r in s.reasons}
    assert "build failed (exit 1)" in reasons


def test_overlay_brings_a_test_written_after_the_regression(tmp_path):
    shas = regression_history(tmp_path / "r", 8, 5)
    test_file = tmp_path / "test_app.py"
    test_file.write_text("from app import BUG\n\ndef test_no_bug():\n    assert not BUG\n")
    cfg = BisectConfig(
        good=shas[0],
        bad=shas[8],
        repo=str(tmp_path / "r"),
        cache_dir=str(tmp_path / "c"),
        probe="pytest",
        overlays=[f"{test_file}:tests/test_app.py"],
        command=[
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:regress",
            "tests/test_app.py",
        ],
        env={"PYTHONPATH": ".", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    result = run_bisect(cfg)
    assert result.culprit.sha == shas[5]
    assert {v for s in result.steps for v in s.verdicts} == {"good", "bad"}


def test_assert_probe_skips_unrelated_breakage(tmp_path):
    script = textwrap.dedent("""\
        grep -q "import error" app.py && { echo "ImportError: no module" >&2; exit 1; }
        grep -q "BUG = True" app.py && { echo "DG_HOST_ASSERT(batch_size == __batch_size and next_n == _next_n)" >&2; exit 134; }
        exit 0
        """)
    commits = [{"app.py": "BUG = False\n"}] + [
        {"app.py": ("import error\n" if 5 <= i <= 6 else "") + f"BUG = {i >= 9}\n"}
        for i in range(1, 13)
    ]
    shas = write_history(tmp_path / "r", commits)
    (tmp_path / "p.sh").write_text(script)
    cfg = BisectConfig(
        good=shas[0],
        bad=shas[12],
        repo=str(tmp_path / "r"),
        probe="assert",
        cache_dir=str(tmp_path / "c"),
        command=["sh", str(tmp_path / "p.sh")],
    )
    result = run_bisect(cfg)
    assert result.culprit.sha == shas[9]
    # the exit-code probe (abort counted as bad) would blame the unrelated import error at 5
    plain = run_bisect(
        BisectConfig(
            good=shas[0],
            bad=shas[12],
            repo=str(tmp_path / "r"),
            cache_dir=str(tmp_path / "c"),
            crash_is_bad=True,
            command=["sh", str(tmp_path / "p.sh")],
        )
    )
    assert plain.culprit.sha == shas[5]


METRIC = textwrap.dedent("""\
    import json, random
    bug = "True" in open("app.py").read()
    al = lambda mean: mean + random.gauss(0, 0.01)
    print("loading the engine...")
    print(json.dumps({"schema": 1, "runs": [{"batch_size": 1, "acceptance_length": al(3.768)},
                      {"batch_size": 8, "acceptance_length": al(3.283 if bug else 3.766)}]}))
    """)


def test_metric_probe_bisects_an_acceptance_length_drop(tmp_path):
    shas = regression_history(tmp_path / "r", 12, 4)
    (tmp_path / "m.py").write_text(METRIC)
    cfg = BisectConfig(
        good=shas[0],
        bad=shas[12],
        repo=str(tmp_path / "r"),
        probe="metric",
        metric="runs[1].acceptance_length",
        direction=+1,
        cache_dir=str(tmp_path / "c"),
        command=[sys.executable, str(tmp_path / "m.py")],
    )
    result = run_bisect(cfg)
    assert result.culprit.sha == shas[4]
    values = [v for s in result.steps for v in s.values]
    assert len(values) == result.probes and min(values) < 3.4 < max(values)
    judged = {s.commit: s.judged for s in result.steps}
    assert judged[shas[4]] == ["bad"]  # decided by the sequential test: no confirmation rerun
    assert result.probes <= 3 + math.ceil(math.log2(12)) + 2  # noise 0.01 << effect 0.48


FLAKY = textwrap.dedent("""\
    import os, pathlib, random, sys
    state = pathlib.Path(os.environ["FLAKE_STATE"])
    n = int(state.read_text()) if state.exists() else 0
    state.write_text(str(n + 1))
    if "True" in open("app.py").read():
        sys.exit(1)
    sys.exit(1 if random.Random(f"{os.environ['REGRESS_COMMIT']}-{n}").random() < 0.25 else 0)
    """)


def test_flaky_probe_is_found_with_confidence(tmp_path):
    shas = regression_history(tmp_path / "r", 16, 6)
    (tmp_path / "f.py").write_text(FLAKY)
    cfg = BisectConfig(
        good=shas[0],
        bad=shas[16],
        repo=str(tmp_path / "r"),
        flaky=True,
        cache_dir=str(tmp_path / "c"),
        command=[sys.executable, str(tmp_path / "f.py")],
        env={"FLAKE_STATE": str(tmp_path / "state")},
    )
    result = run_bisect(cfg)
    assert result.culprit.sha == shas[6]
    assert result.strategy == "flaky" and result.confidence >= 0.99
    assert 0 < result.rates["false_fail"] < 0.5


def test_trtllm_recipe_links_binaries_and_names_the_dsa_module(tmp_path, monkeypatch):
    # Trees regress check recognises (the one era rule): base classes, the DSA class, and the
    # package __init__ of era C.
    eras = {
        "A": ("tensorrt_llm/_torch/attention_backend", "sparse/dsa.py"),
        "C": ("tensorrt_llm/_torch/attention/backends", "sparse/dsa/metadata.py"),
    }

    def tree(i: int) -> dict[str, str]:
        backends, dsa = eras["A"] if i < 5 else eras["C"]
        files = {
            "tensorrt_llm/__init__.py": "",
            f"{backends}/interface.py": "class AttentionMetadata:\n    pass\n",
            f"{backends}/trtllm.py": "class TrtllmAttentionMetadata:\n    pass\n",
            f"{backends}/{dsa}": f"class DSAtrtllmAttentionMetadata:\n    pass\n\n\nBUG = {i >= 7}\n",
            "cpp/kernel.cu": "// v2\n" if i >= 3 else "// v1\n",
        }
        if i >= 5:
            files[f"{backends}/sparse/dsa/__init__.py"] = ""
        return files

    commits = [tree(i) for i in range(10)]
    shas = write_history(tmp_path / "r", commits)
    installed = tmp_path / "site" / "tensorrt_llm"
    (installed / "libs").mkdir(parents=True)
    (installed / "libs" / "libth_common.so").write_text("elf")
    (installed / "bindings.cpython-311-x86_64-linux-gnu.so").write_text("elf")
    monkeypatch.setattr("regress.check.recipes.installed_package", lambda: installed)
    probe = tmp_path / "p.sh"
    probe.write_text(
        "test -L tensorrt_llm/libs/libth_common.so || exit 125\n"
        'echo "$REGRESS_DSA_ERA $REGRESS_DSA_IMPORT $PYTHONPATH" >> "$PROBE_LOG"\n'
        'grep -q "BUG = True" "$REGRESS_DSA_MODULE" && exit 1\nexit 0\n'
    )
    events = []
    cfg = BisectConfig(
        good=shas[0],
        bad=shas[9],
        repo=str(tmp_path / "r"),
        recipe="trtllm",
        cache_dir=str(tmp_path / "c"),
        command=["sh", str(probe)],
        env={"PROBE_LOG": str(tmp_path / "probe.log")},
    )
    result = run_bisect(cfg, progress=events.append)
    assert result.culprit.sha == shas[7]
    lines = [x.split() for x in (tmp_path / "probe.log").read_text().splitlines()]
    assert {x[0] for x in lines} == {"A", "C"}
    assert {x[1] for x in lines} == {
        "tensorrt_llm._torch.attention_backend.sparse.dsa",
        "tensorrt_llm._torch.attention.backends.sparse.dsa.metadata",
    }
    assert all(x[2].split(os.pathsep)[0].startswith(str(tmp_path / "c")) for x in lines)
    assert any(e.kind == "warning" and "touch cpp/" in e.message for e in events)
    assert result.warnings and "build_wheel.py" in result.warnings[0]


# -- a fixed probe is believed; endpoint failures name their cause ---------------------------------


def one_line_error(cfg) -> str:
    with pytest.raises(EndpointError) as err:
        run_bisect(cfg)
    assert err.value.exit_code == 2
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_probe_that_could_not_start_is_believed_once_fixed(repo):
    path, shas, tmp = repo
    probe = tmp / "probe.sh"
    probe.write_text("#!/bin/sh\n" + PROBE)
    probe.chmod(0o644)  # forgot chmod +x
    cfg = config(path, shas, tmp, command=[str(probe)])
    message = one_line_error(cfg)
    assert "could not test the good (old) endpoint" in message
    assert "could not start: Permission denied" in message and "[Errno" not in message
    assert "chmod +x" in message
    log = message.split("(output: ")[1].split(",")[0]
    assert Path(log).is_file() and log.startswith(str(tmp / "cache"))
    assert not any(r["replayable"] for r in bisect_log(str(path), str(tmp / "cache")))
    probe.chmod(0o755)  # fixed in place: same content, so the same stored configuration
    result = run_bisect(cfg)
    assert result.culprit.sha == shas[11] and result.cached == 0
    again = run_bisect(cfg)  # real verdicts are replayed as before
    assert again.cached == again.probes


def test_a_build_that_could_not_run_is_believed_once_fixed(repo):
    path, shas, tmp = repo
    build = tmp / "build.sh"
    build.write_text("#!/bin/sh\nexit 0\n")
    message = one_line_error(config(path, shas, tmp, build=str(build)))
    assert "build failed (exit 126, not executable)" in message and "--build" in message
    build.chmod(0o755)
    assert run_bisect(config(path, shas, tmp, build=str(build))).culprit.sha == shas[11]


def test_a_probe_fixed_in_place_is_a_new_configuration(repo):
    path, shas, tmp = repo
    probe = tmp / "probe.sh"
    probe.write_text("exit 1\n")  # a bug: fails everywhere
    message = one_line_error(config(path, shas, tmp))
    assert "good endpoint does not pass" in message and "last run at" in message
    probe.write_text(PROBE)  # fixed in place, the same command line
    result = run_bisect(config(path, shas, tmp))
    assert result.culprit.sha == shas[11] and result.cached == 0


@pytest.mark.parametrize("command", [["./probe.sh"], ["sh", "probe.sh"]])
def test_an_untracked_probe_is_named_with_the_fix(repo, command):
    path, shas, tmp = repo
    (path / "probe.sh").write_text("#!/bin/sh\n" + PROBE)
    (path / "probe.sh").chmod(0o755)
    message = one_line_error(config(path, shas, tmp, command=command))
    assert f"the probe file {command[-1]} is not committed at {shas[0][:12]}" in message
    assert f"pass an absolute path ({path / 'probe.sh'}) or --overlay {command[-1]}" in message
    fixed = config(path, shas, tmp, command=command, overlays=[str(path / "probe.sh")])
    assert run_bisect(fixed).culprit.sha == shas[11]


@pytest.mark.parametrize(
    ("change", "cause"),
    [
        ({"build": "exit 3"}, "build failed (exit 3)"),
        ({"launcher": ["no-such-launcher"]}, "could not start"),
        ({"probe": "pytest"}, "no JUnit report"),
    ],
)
def test_the_cause_comes_first_and_an_uncommitted_probe_file_is_only_a_note(repo, change, cause):
    # The probe file differs from the committed one, but the run failed for another reason: the
    # message used to open with "the probe file ... differs" and give the cause last.
    path, shas, tmp = repo
    (path / "probe.sh").write_text("#!/bin/sh\n" + PROBE)
    message = one_line_error(config(path, shas, tmp, command=["sh", "probe.sh"], **change))
    assert message.startswith(f"last run at {shas[0][:12]}: {cause}"), message
    assert message.index("could not test") < message.index("note: the probe file probe.sh")


def test_a_probe_edited_but_not_committed_is_named(tmp_path):
    shas = write_history(
        tmp_path / "r", [{"app.py": f"BUG = {i >= 3}\n", "p.sh": "exit 1\n"} for i in range(6)]
    )
    (tmp_path / "r" / "p.sh").write_text(PROBE)  # the fix, in the checkout only
    cfg = config(tmp_path / "r", shas, tmp_path, good=0, bad=5, command=["sh", "p.sh"])
    message = one_line_error(cfg)
    assert f"p.sh in your checkout differs from the one committed at {shas[0][:12]}" in message
    assert "--overlay p.sh" in message


METRIC_TEXT = 'import json; print(json.dumps({"runs": [{"al": 3.7}]}))\n'


@pytest.mark.parametrize(
    ("change", "cause", "fix"),
    [
        ({"command": ["sh", "-c", "sleep 60"], "timeout": 1.0}, "timeout after 1s", "--timeout"),
        ({"build": "echo broken >&2; exit 3"}, "build failed (exit 3)", "--build command by hand"),
        ({"command": ["no-such-probe-command"]}, "could not start", "spelling and PATH"),
        (
            {"probe": "metric", "metric": "runs[0].acceptance_length", "direction": 1},
            "no metric: 'runs[0].acceptance_length': no 'acceptance_length' here",
            "check --metric",
        ),
    ],
)
def test_an_endpoint_failure_names_its_cause_log_and_fix(repo, change, cause, fix):
    path, shas, tmp = repo
    (tmp / "m.py").write_text(METRIC_TEXT)
    if change.get("probe") == "metric":
        change["command"] = [sys.executable, str(tmp / "m.py")]
    message = one_line_error(config(path, shas, tmp, **change))
    assert "the good" in message and "endpoint" in message
    assert message.startswith(f"last run at {shas[0][:12]}: {cause}") and fix in message
    logs = message.split("(output: ")[1].split(")")[0].split(", ")
    assert all(Path(p).is_file() for p in logs)


def test_the_diagnosis_is_about_the_endpoint_that_failed(repo):
    path, shas, tmp = repo
    message = one_line_error(config(path, shas, tmp, build="grep -q 'BUG = False' app.py"))
    assert "could not test the bad (new) endpoint" in message
    assert f"last run at {shas[16][:12]}: build failed (exit 1)" in message
    assert shas[0][:12] not in message


# -- status and log read the stored session ----------------------------------------------------


def test_status_reads_the_stored_session_not_the_cwd_or_moved_refs(repo, tmp_path, monkeypatch):
    path, shas, tmp = repo
    cache = str(tmp / "cache")
    git(["branch", "-f", "main", shas[16]], cwd=path)
    monkeypatch.chdir(path)
    first = run_bisect(config(".", ["main~16", "main"], tmp, good=0, bad=1))
    assert first.culprit.sha == shas[11]
    # main moves on, and status is asked from another repository
    ident = {"GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@y", "GIT_COMMITTER_NAME": "x"}
    ident["GIT_COMMITTER_EMAIL"] = "x@y"
    tree = f"{shas[16]}^{{tree}}"
    moved = git(["commit-tree", tree, "-p", shas[16], "-m", "next"], cwd=path, env=ident)
    git(["update-ref", "refs/heads/main", moved.stdout.strip()], cwd=path)
    (tmp / "probe.sh").write_text(PROBE + "# edited since: a new configuration for `run`\n")
    other = tmp_path / "other"
    regression_history(other, 3, 2)
    monkeypatch.chdir(other)
    state = bisect_status(str(path), cache)
    assert state["session"] == "found" and state["result"]["probes"] == first.probes
    assert shas[11] in state["text"] and f"{first.probes} runs stored" in state["text"]
    assert f"repository: {path}" in state["text"]
    assert [r["commit"] for r in bisect_log(str(path), cache)][:2] == [shas[0], shas[16]]


def test_status_of_a_killed_bisect_is_not_running(repo):
    path, shas, tmp = repo
    run_bisect(config(path, shas, tmp, max_probes=3))
    root = result_root(tmp)
    record = json.loads((root / "session.json").read_text())
    record["status"] = "running"  # what a kill -9 leaves behind
    (root / "session.json").write_text(json.dumps(record))
    state = bisect_status(str(path), str(tmp / "cache"))
    assert state["session"] == "killed" and "rerun the same" in state["text"]
    with locked(root):  # a live bisect holds the lock
        assert bisect_status(str(path), str(tmp / "cache"))["session"] == "running"


def test_every_file_the_bisect_writes_has_one_mode(repo):
    path, shas, tmp = repo
    run_bisect(config(path, shas, tmp, keep_worktrees=True))
    umask = os.umask(0)
    os.umask(umask)
    root = result_root(tmp)
    files = [p for p in root.rglob("*") if p.is_file() and "slots" not in p.parts]
    assert any(p.name == "session.json" for p in files) and any(p.suffix == ".log" for p in files)
    assert {p.stat().st_mode & 0o777 for p in files} == {0o644 & ~umask}


def test_status_of_a_bisect_with_a_recipe_option_replays(repo):
    """status drops the recipe (a replay builds nothing), so the recipe's own options go too."""
    path, shas, tmp = repo
    run_bisect(config(path, shas, tmp, max_probes=3))
    root = result_root(tmp)
    record = json.loads((root / "session.json").read_text())
    record["config"].update(recipe="trtllm-precompiled", options={"wheel": "x.whl"})
    (root / "session.json").write_text(json.dumps(record))
    state = bisect_status(str(path), str(tmp / "cache"))
    assert state["result"]["probes"] == 3, state["text"]
    assert state["config"]["options"] == {"wheel": "x.whl"}  # the stored record, as it was
