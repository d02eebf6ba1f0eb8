"""torch is an extra: the CI plumbing works without it, and the commands that need it say which."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _absent import without_torch_env

from regress.bisect.synthetic import regression_history

REPO = Path(__file__).resolve().parents[2]
GOOD = REPO / "tests" / "data" / "testlists" / "good"
CPU_JUNIT = REPO / "tests" / "data" / "junit" / "current" / "CPU-Unit-1.xml"

# `sys.modules["torch"] = None` makes every `import torch` raise ImportError, as on a runner where
# regress was installed without the torch extra.
WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None
from regress.cli import main
try:
    main(sys.argv[1:])
finally:
    assert "torch" not in {m.split(".")[0] for m, v in sys.modules.items() if v is not None}
"""


def regress_without_torch(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        [
            "bot",
            "parse",
            "/bot run --stage-list H200-*",
            "--author",
            "alice",
            "--test-lists",
            str(GOOD),
        ],
        ["bot", "plan", "/bot run", "--author", "alice", "--test-lists", str(GOOD)],
        ["testlist", "show", "--dir", str(GOOD), "--stage", "H200-1"],
        ["testlist", "validate", "--dir", str(GOOD), "--syntax-only"],
        ["junit", "summary", str(CPU_JUNIT)],
    ],
    ids=["help", "bot-parse", "bot-plan", "testlist-show", "testlist-validate", "junit"],
)
def test_the_ci_plumbing_runs_without_torch(args):
    done = regress_without_torch(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout


@pytest.mark.parametrize("command", ["accept", "demo", "defects", "check", "trend"])
def test_help_works_without_torch(command):
    done = regress_without_torch(command, "--help")
    assert done.returncode == 0, done.stderr
    assert f"Usage: regress {command}" in done.stdout


# Every command's and subcommand's --help, walked from the group (none is missed as one is added).
EVERY_HELP = """
import json, sys
import click
from click.testing import CliRunner
from regress.cli import cli

def paths(group, prefix):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        yield [*prefix, name]
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from paths(command, [*prefix, name])

checked, failed = 0, {}
for path in [[], *paths(cli, [])]:
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="regress")
    checked += 1
    if result.exit_code != 0 or " ".join(["Usage: regress", *path]) not in result.output:
        failed[" ".join(path)] = result.output[-300:]
loaded = {m.partition(".")[0] for m, v in sys.modules.items() if v is not None}
print(json.dumps({"checked": checked, "failed": failed, "torch_loaded": "torch" in loaded}))
"""


def test_the_help_of_every_command_and_subcommand_works_without_torch(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", EVERY_HELP],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=without_torch_env(tmp_path),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["failed"] == {}
    assert not doc["torch_loaded"]
    assert doc["checked"] > 20  # the subcommands of bisect, trend, junit... were walked too


def test_bisect_runs_without_torch_in_it_or_in_what_it_starts(tmp_path):
    # a shell probe needs no torch, so neither may the bisect, its guardian or its status
    shas = regression_history(tmp_path / "repo", 10, 6)
    (tmp_path / "probe.sh").write_text('grep -q "BUG = True" app.py && exit 1\nexit 0\n')
    where = ["--repo", str(tmp_path / "repo"), "--cache-dir", str(tmp_path / "cache")]
    env = without_torch_env(tmp_path / "site")

    def bisect(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "regress", "bisect", *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
            env=env,
            check=False,
        )

    done = bisect("run", *where, "--good", shas[0], "--", "sh", str(tmp_path / "probe.sh"))
    assert done.returncode == 0, done.stderr
    assert f"first bad commit: {shas[6]}" in done.stdout
    for sub in ("status", "log"):
        done = bisect(sub, *where)
        assert done.returncode == 0, done.stderr
        assert shas[6][:12] in done.stdout
    assert "torch" not in done.stderr


@pytest.mark.parametrize("command", [["accept"], ["demo"], ["defects"], ["check"]])
def test_commands_that_need_torch_say_an_install_that_works_from_here(command):
    done = regress_without_torch(*command)
    assert done.returncode == 3  # MissingDependencyError is an EngineError (errors.py)
    assert f"regress {command[0]} needs torch" in done.stderr
    # no index serves trtllm-regress: the advice is torch's own install, and the checkout's
    assert "pip install torch==2.13.0" in done.stderr
    assert f"pip install -e '{REPO}[torch]'" in done.stderr
    assert "trtllm-regress[" not in done.stderr
    assert "Traceback" not in done.stderr


def test_the_package_metadata_keeps_torch_out_of_the_core_dependencies():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not any(dep.startswith("torch") for dep in project["dependencies"])
    assert any(dep.startswith("torch") for dep in project["optional-dependencies"]["torch"])
    assert any(dep.startswith("torch") for dep in project["optional-dependencies"]["test"])


def test_the_distribution_name_is_free_of_the_regex_bindings_and_the_import_name_stays():
    # PyPI's `regress` is Python bindings to Rust's regex engine with its own top-level
    # `regress` module: `pip install regress` installed that, not us.
    import tomllib

    from regress import DISTRIBUTION

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "trtllm-regress"
    assert project["scripts"] == {"regress": "regress.cli:main"}
    assert (REPO / "regress" / "__init__.py").is_file()
    readme = (REPO / "README.md").read_text()
    # named, but never offered as `pip install 'trtllm-regress[torch]'`: no index serves it
    assert f"`{DISTRIBUTION}`" in readme and f"'{DISTRIBUTION}[" not in readme
    assert "pip install -e '.[torch]'" in readme
