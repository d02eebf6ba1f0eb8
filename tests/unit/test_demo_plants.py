"""``regress demo --defect NAME``: every registered defect has a plant, and its probe sees it.

Each plant's probe is run on the history's first commit (good) and on the planted commit (bad),
as the bisect runs it (from a checkout, with the probe overlaid), and must tell them apart the way
its bisect reads it: a metric that falls, an exit code, or the abort's signature. One plant also
runs end to end through the CLI; the two seed bugs do in test_demo.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from regress.cli import cli
from regress.demo.history import build_demo_repo
from regress.demo.plants import PLANTS
from regress.demo.probes import EVENTS_ENV, INDEX_SHARE_ENV, write_probes
from regress.reference.defects import DEFECTS


def test_every_registered_defect_has_a_plant():
    assert set(PLANTS) == set(DEFECTS)


def _probe(tmp_path, repo, plant, commit):
    tree = tmp_path / f"tree-{commit[:8]}"
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(tree), commit], cwd=repo, check=True
    )
    probes = write_probes(tmp_path / "probes")
    env = {**os.environ, "REGRESS_DEMO_PROMPTS": "4", "REGRESS_DEMO_TOKENS": "16"}
    env.pop("REGRESS_DEFECTS", None)
    env.pop(EVENTS_ENV, None)
    if plant.defect == "index_share_rejected_branch":
        env[INDEX_SHARE_ENV] = "1"
    return subprocess.run(
        [sys.executable, str(probes[plant.script])],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


#: The probe's run on a history's first commit, by (that commit's tree, probe script, index
#: share): every plant's history starts from the same first commit, so the plants one probe
#: hunts share its run there (5 runs of a torch-importing probe instead of 8).
_FIRST_RUNS: dict[tuple[str, str, bool], subprocess.CompletedProcess] = {}


def _probe_first(tmp_path, repo, plant):
    tree = subprocess.run(
        ["git", "rev-parse", f"{repo.first}^{{tree}}"],
        cwd=repo.path, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    key = (tree, plant.script, plant.defect == "index_share_rejected_branch")
    if key not in _FIRST_RUNS:
        _FIRST_RUNS[key] = _probe(tmp_path, repo.path, plant, repo.first)
    return _FIRST_RUNS[key]


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_each_plants_probe_tells_the_planted_commit_from_the_first(tmp_path, name):
    plant = PLANTS[name]
    repo = build_demo_repo(tmp_path / "repo", commits=8, seed=2, plants=[name])
    good = _probe_first(tmp_path, repo, plant)
    bad = _probe(tmp_path, repo.path, plant, repo.planted[name])
    assert good.returncode == 0, good.stdout[-1500:] + good.stderr[-1500:]
    if plant.probe == "metric":
        metric = plant.bisect["metric"]
        before, after = json.loads(good.stdout)[metric], json.loads(bad.stdout)[metric]
        assert after < 0.95 * before, (metric, before, after)
    elif plant.probe == "assert":
        signature = plant.bisect.get("options", {}).get("signature", r"DG_HOST_ASSERT\(")
        assert bad.returncode != 0 and re.search(signature, bad.stdout + bad.stderr)
        assert not re.search(signature, good.stdout + good.stderr)
    else:
        assert bad.returncode == 1, bad.stdout[-1500:] + bad.stderr[-1500:]
        assert "VIOLATION" in bad.stdout


def test_demo_finds_a_planted_pool_exhaustion_with_the_assert_probe(tmp_path, monkeypatch):
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    out = CliRunner().invoke(
        cli,
        ["demo", "--commits", "8", "--defect", "indexer_pool_exhaustion", "--json", "-",
         "--workdir", str(tmp_path / "d")],
    )  # fmt: skip
    assert out.exit_code == 0, out.output[-3000:]
    doc = json.loads(out.stdout)
    assert doc["ok"] is True and doc["planted"] == ["indexer_pool_exhaustion"]
    (bisect,) = doc["bisects"]
    assert bisect["probe"] == "assert" and bisect["matched"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--defect", "nope"], "unknown defect(s): nope"),
        (["--defect", "stale_req_idx", "--trend"], "drop --trend"),
    ],
)
def test_bad_defect_options_exit_2(tmp_path, args, message):
    out = CliRunner().invoke(cli, ["demo", "--workdir", str(tmp_path / "d"), *args])
    assert out.exit_code == 2
    assert message in out.output
