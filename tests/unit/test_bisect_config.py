"""BisectConfig refuses bad values itself, so the CLI, the demo and a replayed session agree."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from regress.bisect.config import BisectConfig
from regress.bisect.session import run_bisect
from regress.bisect.synthetic import regression_history
from regress.cli import cli
from regress.errors import UsageError

PROBE = 'grep -q "BUG = True" app.py && exit 1\nexit 0\n'

BAD = [
    ({"jobs": 0}, "--jobs"),
    ({"max_probes": 0}, "--max-probes"),
    ({"timeout": float("nan")}, "--timeout"),
    ({"timeout": -1.0}, "--timeout"),
    ({"endpoint_runs": 0}, "--endpoint-runs"),
    ({"verify_runs": -1}, "--verify-runs"),
    ({"confidence": float("nan")}, "--confidence"),
    ({"metric_runs": (1, 1, 4)}, "--metric-runs"),
    ({"metric_runs": (5, 3, 2)}, "--metric-runs"),
    ({"probe": "nope"}, "--probe"),
    ({"command": []}, "no probe command"),
]


@pytest.mark.parametrize(("fields", "message"), BAD)
def test_bad_values_are_usage_errors(fields, message):
    with pytest.raises(UsageError, match=message) as err:
        BisectConfig(**{"good": "a", "bad": "b", "command": ["true"], **fields})
    assert err.value.exit_code == 2


def test_the_demo_metric_caps_are_valid():
    # regress demo runs its metric bisect with (2, 1, 4); the CLI used to refuse first runs of 1
    config = BisectConfig(
        good="a", bad="b", command=["x"], probe="metric", metric="m", metric_runs=(2, 1, 4)
    )
    assert config.metric_runs == (2, 1, 4)


@pytest.mark.parametrize(
    "args",
    [
        ["-j", "0"],
        ["--max-probes", "0"],
        ["--timeout", "nan"],
        ["--endpoint-runs", "0"],
        ["--verify-runs", "-1"],
        ["--metric-runs", "2,1,4", "--probe", "metric", "--metric", "x", "--confidence", "2"],
    ],
)
def test_cli_refuses_bad_values_with_one_line_and_writes_nothing(tmp_path, args):
    regression_history(tmp_path / "repo", 10, 6)
    (tmp_path / "probe.sh").write_text(PROBE)
    result = CliRunner().invoke(
        cli,
        [
            "bisect",
            "run",
            "--repo",
            str(tmp_path / "repo"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--good",
            "HEAD~10",
            *args,
            "--",
            "sh",
            str(tmp_path / "probe.sh"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "cache").exists()


def test_more_jobs_than_the_range_can_use_are_capped_and_said(tmp_path):
    shas = regression_history(tmp_path / "repo", 19, 11)
    (tmp_path / "probe.sh").write_text(PROBE)
    seen = []
    result = run_bisect(
        BisectConfig(
            good=shas[0],
            bad=shas[-1],
            repo=str(tmp_path / "repo"),
            command=["sh", str(tmp_path / "probe.sh")],
            cache_dir=str(tmp_path / "cache"),
            jobs=1000,
            launcher=["env"],  # jobs beyond the CPUs run elsewhere (here: a no-op launcher)
        ),
        progress=seen.append,
    )
    assert result.culprit.sha == shas[11]
    assert any("--jobs 1000 capped to 18" in w for w in result.warnings)
    assert any(p.kind == "warning" and "capped" in p.message for p in seen)


def test_the_recipe_is_built_once_for_validation_preflight_and_plan(monkeypatch):
    """A recipe may read files when built (a --known list): one build per config and name."""
    from regress.bisect import registry

    built = []
    real = registry.make_recipe
    monkeypatch.setattr(registry, "make_recipe", lambda n, c: built.append(n) or real(n, c))
    config = BisectConfig(good="A", bad="B", command=[], recipe="trtllm-source")
    assert config.recipe_entry() is config.recipe_entry()
    assert built == ["trtllm-source"]
    config.recipe = None  # a replay drops the recipe: nothing stale is handed out
    assert config.recipe_entry() is None
