"""Every historical defect is caught: by the contract battery and by the unit suite itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from regress.errors import UsageError
from regress.reference import metadata as metadata_module
from regress.reference.defects import (
    CONTRACTS,
    DEFECTS,
    ENV_VAR,
    active_defects,
    validate_defects,
)
from regress.reference.scenarios import run_contract_battery

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_TESTS = [
    "tests/unit/test_metadata.py",
    "tests/unit/test_announce.py",
    "tests/unit/test_block_table_defect.py",
]
#: Defects of the metadata contracts; the draft-cache ones are caught elsewhere (their tests are
#: in test_draft_cache_defects.py), and the battery must stay silent on them.
CONTRACT_DEFECTS = sorted(n for n, d in DEFECTS.items() if CONTRACTS in d.caught_by)
ENGINE_DEFECTS = sorted(set(DEFECTS) - set(CONTRACT_DEFECTS))


def test_correct_code_passes_the_battery():
    assert run_contract_battery() == []  # honours REGRESS_DEFECTS: fails when one is set


@pytest.mark.parametrize("name", CONTRACT_DEFECTS)
def test_battery_catches_each_defect(name):
    violations = run_contract_battery(defects={name})
    assert violations, f"no contract check catches defect {name!r}: add a scenario for it"
    assert all(v.details.get("scenario") for v in violations)


def test_the_battery_is_not_claimed_for_engine_defects():
    """The draft-cache defects break no metadata contract: the battery passes them, as listed."""
    assert ENGINE_DEFECTS == [
        "index_share_rejected_branch",
        "indexer_pool_exhaustion",
        "no_accept_v1_cache_manager",
    ]
    assert run_contract_battery(defects=set(ENGINE_DEFECTS)) == []


@pytest.mark.parametrize("name", CONTRACT_DEFECTS)
def test_unit_suite_fails_with_each_defect_switched_on(name, pytester, monkeypatch):
    """The literal promise: REGRESS_DEFECTS=<defect> pytest <contract tests> fails.

    The pytest run is in this process (pytester's inline run, with the project's own ini): the
    defects are read from the environment when the code runs, never at import, so a fresh
    process (and its ``import torch``, 1.1 CPU s) would prove nothing more.
    """
    monkeypatch.setenv(ENV_VAR, name)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # the inner run is no worker
    result = pytester.runpytest_inprocess(
        "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist",
        "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"),
        *(str(ROOT / test) for test in CONTRACT_TESTS),
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-2000:]
    assert result.parseoutcomes().get("failed") == 1  # -x: the first failure ends the run


def test_stale_builder_is_caught(monkeypatch):
    """Replacing build_req_idx_per_token with one that leaves the old map fails the battery."""

    def stale_build(seq_lens, num_tokens, out=None, **_):
        return out[:num_tokens]  # returns whatever prepare() left there

    monkeypatch.setattr(metadata_module, "build_req_idx_per_token", stale_build)
    checks = {v.check for v in run_contract_battery(defects=())}
    assert "req_idx_map" in checks


def test_registry_entries_are_documented():
    for name, defect in DEFECTS.items():
        assert defect.name == name
        assert defect.summary and defect.upstream and defect.symptom and defect.caught_by


def test_env_var_selects_defects(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "stale_req_idx, method_hasattr_guard")
    assert active_defects() == {"stale_req_idx", "method_hasattr_guard"}
    assert active_defects(()) == frozenset()  # explicit beats the environment
    monkeypatch.delenv(ENV_VAR)
    assert active_defects() == frozenset()


def test_unknown_defect_is_a_usage_error_listing_known_ones():
    with pytest.raises(UsageError, match="stale_req_idx") as info:
        validate_defects(["stale_map"])
    assert info.value.exit_code == 2
    assert "stale_map" in str(info.value)
