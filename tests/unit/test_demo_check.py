"""``regress demo --check``: ``regress check`` shown without a TensorRT-LLM checkout (issue 31).

Two of regress's own fake trees: before the fix the check must fail a contract (exit 1), after it
pass (exit 0); the demo exits 0 only when both come out so.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from regress.cli import cli


def test_demo_check_fails_the_tree_before_the_fix_and_passes_the_one_after(tmp_path):
    result = CliRunner().invoke(
        cli, ["demo", "--check", "--json", "-", "--workdir", str(tmp_path / "w")]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    trees = doc["trees"]
    assert doc["ok"] is True
    assert (trees["before-fix"]["status"], trees["after-fix"]["status"]) == ("fail", "pass")
    assert "[check] checking the before-fix tree" in result.stderr  # progress as it goes
    assert not (tmp_path / "w").exists()  # the trees are removed unless --keep


def test_demo_check_runs_alone():
    result = CliRunner().invoke(cli, ["demo", "--check", "--trend"])
    assert result.exit_code == 2 and "--check runs alone" in result.stderr
