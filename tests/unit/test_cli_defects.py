"""``regress defects`` through click's CliRunner."""

from __future__ import annotations

import json

from click.testing import CliRunner

from regress.cli import cli


def test_lists_every_defect():
    result = CliRunner().invoke(cli, ["defects", "--json"])
    assert result.exit_code == 0
    names = {d["name"] for d in json.loads(result.output)}
    assert {
        "stale_req_idx",
        "arange_only_refresh",
        "unannounced_mtp_shapes",
        "method_hasattr_guard",
    } <= names


def test_check_passes_clean_and_fails_with_a_defect(monkeypatch):
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    clean = CliRunner().invoke(cli, ["defects", "--check"])
    assert clean.exit_code == 0, clean.output
    assert "0 contract violation(s)" in clean.output
    bad = CliRunner().invoke(cli, ["defects", "--check", "--defect", "stale_req_idx"])
    assert bad.exit_code == 1
    assert "req_idx_per_token is stale" in bad.output


def test_unknown_defect_exits_2():
    result = CliRunner().invoke(cli, ["defects", "--check", "--defect", "nope"])
    assert result.exit_code == 2
    assert "unknown defect(s): nope" in result.output


def test_help_lists_subcommands_without_importing_torch():
    import subprocess
    import sys

    code = (
        "import sys; from regress.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'regress --help imported torch'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "defects" in proc.stdout
