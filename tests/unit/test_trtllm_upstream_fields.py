"""Every case builds its LLM as upstream's test of the same model does, or says why not.

``tests/data/trtllm/upstream_llm_kwargs.yaml`` is our transcription of upstream's tests, one row
per field with its file and commit. Each case's ``LLM(**kwargs)``, built through a fake
``tensorrt_llm.llmapi`` of the newest shape (@ 00043967), must match it field by field; a field
may differ only where ``regress.trtllm.cases.DEVIATIONS`` names it and the case sets that
deviation's parameter away from upstream's value (or the deviation is ``always``).
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import pytest
import yaml
from _trtllm_fakes import flatten_llm_kwargs, recording_llmapi

from regress.trtllm.cases import (
    DEVIATIONS,
    MODELS,
    Case,
    cases,
    index_share_cases,
    kv_manager_cases,
    pool_fill_cases,
)
from regress.trtllm.llm_config import to_llm_kwargs

TABLE = Path(__file__).resolve().parents[1] / "data" / "trtllm" / "upstream_llm_kwargs.yaml"
ABSENT = "<not passed>"
#: One GPU of each kind upstream's settings tell apart (SM120: Blackwell, not SM 100/103).
SMS = (90, 100, 103, 120)


@functools.cache
def load_table() -> dict:
    return yaml.safe_load(TABLE.read_text(encoding="utf-8"))


def upstream_fields(node: str, sm: int, table: dict | None = None) -> dict[str, object]:
    """``field -> value`` (or ``ABSENT``) of upstream's test ``node`` on architecture ``sm``."""
    table = table or load_table()
    entry = table["tests"][node]
    rows = entry
    if isinstance(entry, dict):
        rows = [*upstream_rows(table, entry["extends"]), *entry["rows"]]
    # The table's own architecture set, not the library's: the rule is what is under test.
    arch = "sm100f" if sm in table["arches"]["sm100f"] else "other"
    found = {}
    for row in rows:
        assert row["source"] in table["sources"], f"{node} {row['field']}: unknown source"
        if row.get("arch", arch) == arch:
            found[row["field"]] = ABSENT if row.get("absent") else row["value"]
    return found


def upstream_rows(table: dict, node: str) -> list[dict]:
    entry = table["tests"][node]
    return (
        entry
        if isinstance(entry, list)
        else [*upstream_rows(table, entry["extends"]), *entry["rows"]]
    )


def allowed(case: Case | None) -> set[str]:
    """The fields this case may pass unlike upstream (``None``: upstream's own spec)."""
    params = case.deviations() if case is not None else set()
    return {f for f, d in DEVIATIONS.items() if d.parameter == "always" or d.parameter in params}


def differences(ours: dict, theirs: dict, may_differ: set[str]) -> list[str]:
    """Fields where ``ours`` is not upstream's and no allowed deviation covers it."""
    problems = []
    for name in sorted(set(ours) | {k for k, v in theirs.items() if v != ABSENT}):
        mine, upstream = ours.get(name, ABSENT), theirs.get(name, ABSENT)
        covered = any(name == f or name.startswith(f + ".") for f in may_differ)
        if mine != upstream and not covered:
            problems.append(f"{name}: ours {mine!r}, upstream {upstream!r}")
    return problems


def all_cases():
    for model in MODELS:
        yield from itertools.chain(
            cases(model), kv_manager_cases(model), index_share_cases(model), pool_fill_cases(model)
        )


CASES = list(all_cases())


@pytest.mark.parametrize("sm", SMS, ids=lambda sm: f"sm{sm}")
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.model.test_class}-{c.id}")
def test_every_field_is_upstreams_or_a_named_deviation(case, sm):
    ours = flatten_llm_kwargs(to_llm_kwargs(case.spec("/m", sm=sm), recording_llmapi()))
    theirs = upstream_fields(case.model.upstream.node, sm)
    problems = differences(ours, theirs, allowed(case))
    assert not problems, f"{case.model.test_class} {case.id} on sm{sm}:\n" + "\n".join(problems)


@pytest.mark.parametrize("sm", SMS, ids=lambda sm: f"sm{sm}")
@pytest.mark.parametrize(
    ("model", "variant"),
    [(m, v) for m in MODELS for v in m.variants],
    ids=lambda x: getattr(x, "name", None) or getattr(x, "test_class", "?"),
)
def test_upstream_config_is_upstreams_test_exactly(model, variant, sm):
    """test_upstream_config builds the LLM with nothing of ours but the ``always`` fields."""
    spec = model.upstream_spec("/m", sm=sm, variant=variant.name)
    ours = flatten_llm_kwargs(to_llm_kwargs(spec, recording_llmapi()))
    problems = differences(ours, upstream_fields(variant.test.node, sm), allowed(None))
    assert not problems, f"{variant.test.node} on sm{sm}:\n" + "\n".join(problems)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.model.test_class}-{c.id}")
def test_every_parameter_set_away_from_upstream_changes_a_field(case):
    """A deviation that changes nothing would be a parameter in name only."""
    ours = flatten_llm_kwargs(to_llm_kwargs(case.spec("/m", sm=100), recording_llmapi()))
    theirs = upstream_fields(case.model.upstream.node, 100)
    for param in case.deviations():
        fields = {f for f, d in DEVIATIONS.items() if d.parameter == param}
        touched = [
            name
            for name in set(ours) | set(theirs)
            if any(name == f or name.startswith(f + ".") for f in fields)
            and ours.get(name, ABSENT) != theirs.get(name, ABSENT)
        ]
        assert touched, f"{case.id}: parameter {param} changed none of {sorted(fields)}"


def test_the_table_cites_a_file_and_a_full_commit_for_every_row():
    table = load_table()
    for source in table["sources"].values():
        assert source["path"].startswith(("tests/", "tensorrt_llm/"))
        assert len(source["commit"]) == 40
    for node in table["tests"]:
        for row in upstream_rows(table, node):
            assert row["source"] in table["sources"]
            assert ("value" in row) != bool(row.get("absent")), row


def test_each_model_follows_the_table_it_cites():
    table = load_table()
    for model in MODELS:
        assert model.upstream.node in table["tests"]
        source = next(s for s in table["sources"].values() if s["path"] == model.upstream.path)
        assert source["commit"] == model.upstream.commit
