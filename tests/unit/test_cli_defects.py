"""``regress defects`` through click's CliRunner."""

from __future__ import annotations

import json

from _outputs import blocked_path, fill_the_disk
from click.testing import CliRunner

from regress.cli import cli


def test_lists_every_defect():
    result = CliRunner().invoke(cli, ["defects", "--json"])
    assert result.exit_code == 0
    listed = {d["name"]: d for d in json.loads(result.output)}
    assert {
        "stale_req_idx",
        "arange_only_refresh",
        "unannounced_mtp_shapes",
        "method_hasattr_guard",
        "no_accept_v1_cache_manager",
        "index_share_rejected_branch",
        "indexer_pool_exhaustion",
    } <= set(listed)
    for d in listed.values():  # upstream reference, mechanism, symptom and the catching tools
        assert d["upstream"] and d["summary"] and d["symptom"] and d["caught_by"], d["name"]
    text = CliRunner().invoke(cli, ["defects"]).output
    assert "#18662" in text and "#15806" in text and "#18660" in text
    assert "caught by: baseline" in text and "caught by: assert" in text


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


# --- --json FILE|-, devices, and failures as one line with their exit code ----------------------


def test_json_takes_a_file_or_dash_and_a_bare_json_still_means_stdout(tmp_path):
    bare = CliRunner().invoke(cli, ["defects", "--json"])
    dash = CliRunner().invoke(cli, ["defects", "--json", "-"])
    assert bare.exit_code == dash.exit_code == 0
    assert json.loads(bare.stdout) == json.loads(dash.stdout)
    out = tmp_path / "sub" / "defects.json"
    to_file = CliRunner().invoke(cli, ["defects", "--json", str(out)])
    assert to_file.exit_code == 0
    assert json.loads(out.read_text()) == json.loads(dash.stdout)
    assert "stale_req_idx\n  " in to_file.stdout  # the text still shows


def test_bare_json_before_another_option_means_stdout(monkeypatch):
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    result = CliRunner().invoke(cli, ["defects", "--json", "--check"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def test_unwritable_json_fails_before_the_battery(tmp_path, monkeypatch):
    import regress.reference.scenarios as scenarios

    ran = []
    monkeypatch.setattr(scenarios, "run_contract_battery", lambda **k: ran.append(k) or [])
    blocked = blocked_path(tmp_path)
    result = CliRunner().invoke(cli, ["defects", "--check", "--json", str(blocked)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"regress: error: --json {blocked}: {blocked.parent} is not a folder; choose another path"
    ]
    assert ran == []


def test_write_error_is_exit_2(tmp_path, monkeypatch):
    fill_the_disk(monkeypatch)
    result = CliRunner().invoke(cli, ["defects", "--json", str(tmp_path / "d.json")])
    assert result.exit_code == 2
    assert "No space left on device" in result.stderr and "internal error" not in result.stderr


def test_bogus_device_exits_2_in_one_line():
    result = CliRunner().invoke(cli, ["defects", "--check", "--device", "bogus"])
    assert result.exit_code == 2
    assert "'bogus' is not one of 'cpu', 'cuda'" in result.stderr
    assert "Traceback" not in result.output


def test_cuda_without_cuda_exits_2_in_one_line(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(cli, ["defects", "--check", "--device", "cuda"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "regress: error: --device cuda: torch sees no CUDA device on this machine; use --device cpu"
    ]


def test_a_defect_without_check_is_refused_not_ignored():
    from click.testing import CliRunner

    from regress.cli import cli

    result = CliRunner().invoke(cli, ["defects", "--defect", "stale_req_idx"])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "--defect" in line and "add --check" in line
    assert result.stdout == ""
