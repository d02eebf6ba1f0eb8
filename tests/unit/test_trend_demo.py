"""``regress demo --trend``: nightly reports to the planted commit with no hand-written command."""

from __future__ import annotations

import json
import subprocess

from click.testing import CliRunner

from regress.cli import cli


def _is_ancestor(repo, a, b):
    return subprocess.run(["git", "merge-base", "--is-ancestor", a, b], cwd=repo).returncode == 0


def test_nightly_reports_lead_to_the_planted_commit(tmp_path, monkeypatch):
    monkeypatch.setenv("REGRESS_DEMO_PROMPTS", "8")
    monkeypatch.setenv("REGRESS_DEMO_TOKENS", "24")
    out = CliRunner().invoke(
        cli,
        ["demo", "--trend", "--commits", "30", "--json", "-", "--keep", "--workdir",
         str(tmp_path / "d")],
    )  # fmt: skip
    assert out.exit_code == 0, out.output[-3000:]
    doc = json.loads(out.stdout)
    assert doc["ok"] is True
    assert doc["culprit"] == doc["planted"]
    assert doc["check_exit_code"] == 1
    # the nights bracket the planted commit, and the bisect was the one trend check planned
    repo = doc["repo"]
    assert doc["last_good"] != doc["planted"]
    assert _is_ancestor(repo, doc["last_good"], doc["planted"])
    assert _is_ancestor(repo, doc["planted"], doc["first_bad"])
    planned = {f["bisect"]["command"] for f in doc["findings"] if f["bisect"]}
    assert planned == {doc["bisect_command"]}
    assert doc["bisect_command"].startswith(
        f"regress bisect run --good {doc['last_good']} --bad {doc['first_bad']}"
    )
    assert doc["findings"][0]["metric"] == "runs[batch=8].acceptance_length"
    assert doc["bisect_exit_code"] == 0
