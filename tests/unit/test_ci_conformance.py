"""Conformance: regress reads every real upstream file in ``../shared/upstream-data/``.

The folder (see its PROVENANCE.md) holds copies of TensorRT-LLM's test-db lists, an excerpt of
``waives.txt`` with every syntax variant, ``acceptance_length.yaml``, the examples of upstream's
docs and 43 real ``/bot`` comments. It is data beside the repository, never committed into it, so
these tests skip, saying why, where it is absent. ``REGRESS_UPSTREAM_DATA`` points elsewhere.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from regress.acceptance.baseline import load_upstream_reference
from regress.ci.bot import BotRejection, parse_comment
from regress.ci.stages import StageLists, load_stages
from regress.ci.testlist import Stage, load_test_db
from regress.ci.waives import applicable, load_waives
from regress.cli import cli

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = Path(os.environ.get("REGRESS_UPSTREAM_DATA") or REPO.parent / "shared" / "upstream-data")

pytestmark = pytest.mark.skipif(
    not (UPSTREAM / "PROVENANCE.md").is_file(),
    reason=f"no upstream data at {UPSTREAM} (a copy of shared/upstream-data beside the repository; "
    "set REGRESS_UPSTREAM_DATA to use another)",
)

#: Comments upstream would not run either, with the reason. Each is still checked: it must be
#: refused for exactly that reason.
REFUSED = {
    '/bot run --stage-list "A100X-Triton-[Post-Merge]-1,A100X-Triton-[Post-Merge]-2"': (
        # A docs example (ci-overview.md @ 0c90a6ca) naming stages that are not among the real
        # stage names of bot-stages.yml; upstream's later docs say Jenkins matches this spelling
        # exactly and "silently selects nothing". Given the stages, it parses (test below).
        "unknown stage 'A100X-Triton-[Post-Merge]-1'"
    ),
}


def list_files() -> list[Path]:
    return sorted(p for p in UPSTREAM.glob("*.yml") if p.name != "bot-stages.yml")


def comments() -> list[tuple[str, str]]:
    rows = []
    for line in (UPSTREAM / "bot-comments.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip():
            source, comment = line.split("\t", 1)
            rows.append((source, comment))
    return rows


def bot_stages() -> dict[str, Stage]:
    return load_stages(UPSTREAM / "bot-stages.yml")


def parse(comment: str, stages: dict) -> object:
    return parse_comment(comment, author="alice", allowed=frozenset({"alice"}), stages=stages)


def test_every_real_test_db_file_parses_and_has_tests():
    files = list_files()
    assert len(files) >= 4
    for path in files:
        db = load_test_db(path)
        assert db.contexts, path
        assert all(block.entries for blocks in db.contexts.values() for block in blocks), path


def test_the_real_test_db_folder_validates_through_the_cli(tmp_path):
    folder = tmp_path / "test-db"
    folder.mkdir()
    for path in list_files():
        shutil.copy(path, folder / path.name)
    result = CliRunner().invoke(
        cli,
        [
            "testlist",
            "validate",
            "--dir",
            str(folder),
            "--syntax-only",
            "--waives",
            str(UPSTREAM / "waives.excerpt.txt"),
        ],
    )
    assert result.exit_code == 0, result.output


def test_a_context_query_selects_real_blocks_as_trt_test_db_would(tmp_path):
    for path in list_files():
        if path.name.startswith("l0_"):
            shutil.copy(path, tmp_path / path.name)
    lists = StageLists.load(tmp_path)
    h200 = {
        "gpu": "H200",
        "system_gpu_count": "4",
        "stage": "post_merge",
        "backend": "tensorrt",
        "cpu": "x86_64",
        "linux_distribution_name": "ubuntu",
        "orchestrator": "mpi",
    }
    db = lists.context("l0_dgx_h200")
    chosen = lists.query("l0_dgx_h200", h200, exact=True)
    blocks = [
        b
        for b in db.contexts["l0_dgx_h200"]
        if dict(b.condition.terms).get("backend") == "tensorrt"
    ]
    assert chosen == list(blocks[0].entries)
    assert any(e.markexpr for e in chosen)  # the -m "gpu2 and part0" lines
    assert lists.query("l0_dgx_h200", {**h200, "gpu": "B200"}, exact=True) == []
    assert lists.query("l0_dgx_h200", {**h200, "system_gpu_count": "8"}, exact=True) == []
    b200 = {**h200, "gpu": "B200", "backend": "pytorch", "stage": "pre_merge"}
    ds = lists.query("l0_dgx_b200_ds", b200, exact=True)
    assert ds and sum(e.keyword is not None for e in ds) == 4
    assert lists.query("l0_dgx_b200_ds", {**b200, "orchestrator": "ray"}, exact=True) == []


def test_the_real_waive_excerpt_parses_every_line():
    waives = load_waives(UPSTREAM / "waives.excerpt.txt")
    lines = {w.line for w in waives}
    text = (UPSTREAM / "waives.excerpt.txt").read_text(encoding="utf-8").splitlines()
    assert lines == {n for n, raw in enumerate(text, start=1) if raw.split("#")[0].strip()}
    assert any(w.reason is None for w in waives)
    assert any(w.markexpr for w in waives) and any(w.keyword for w in waives)
    assert len(waives) > len(lines)  # a multi-path line gives several


def test_real_full_scopes_follow_the_stage_name():
    waives = load_waives(UPSTREAM / "waives.excerpt.txt")
    scoped = {w.scope for w in waives if w.scope}
    assert {"B200", "sm100", "DGX_H100", "A10"} <= scoped
    in_b200 = {w.scope for w in applicable(waives, "B200-PyTorch-1") if w.scope}
    assert in_b200 == {"B200"}
    in_dgx_h100 = {w.scope for w in applicable(waives, "DGX_H100-4_GPUs-PyTorch-1") if w.scope}
    assert in_dgx_h100 == {"DGX_H100"}


def test_every_real_acceptance_entry_loads():
    import yaml

    path = UPSTREAM / "acceptance_length.yaml"
    keys = list(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert keys
    for key in keys:
        reference = load_upstream_reference(path, key)
        assert 0 < reference.min_al <= (reference.ref_al or reference.min_al)


def test_the_real_stage_names_load_as_a_stages_file():
    stages = bot_stages()
    assert len(stages) >= 20
    assert "DGX_B200-4_GPUs-PyTorch-Post-Merge-1" in stages


def test_all_real_bot_comments_parse_or_are_refused_for_the_documented_reason():
    stages = bot_stages()
    rows = comments()
    assert len(rows) == 43
    parsed = 0
    for source, comment in rows:
        if comment in REFUSED:
            with pytest.raises(
                BotRejection, match=REFUSED[comment].replace("[", r"\[").replace("]", r"\]")
            ):
                parse(comment, stages)
            continue
        command = parse(comment, stages)
        assert parse(command.to_comment(), stages) == command, source
        parsed += 1
    assert parsed == 43 - len(REFUSED)


def test_the_bracketed_docs_example_parses_once_its_stages_exist():
    stages = dict(bot_stages())
    template = next(iter(stages.values()))
    for name in ("A100X-Triton-Post-Merge-1", "A100X-Triton-Post-Merge-2"):
        stages[name] = Stage(name, "l0_a100", "A100X", 1, "post_merge", "triton")
    [comment] = REFUSED
    command = parse(comment, stages)
    assert command.options.stage_list == ("A100X-Triton-Post-Merge-1", "A100X-Triton-Post-Merge-2")
    assert template.name in stages
