"""Waive lists: parsing with line numbers, GPU scoping, and which waive covers a test."""

from __future__ import annotations

from pathlib import Path

import pytest

from regress.ci.testlist import TestListError
from regress.ci.waives import applicable, gpu_matches, load_waives, waive_for

GOOD = Path(__file__).resolve().parents[1] / "data" / "testlists" / "good" / "waives.txt"


def test_fixture_waives_parse_with_kinds_reasons_scopes_and_lines():
    waives = load_waives(GOOD)
    assert [(w.test_id, w.kind, w.reason, w.gpu, w.line) for w in waives] == [
        ("tests/unit/test_u.py::test_b[2]", "SKIP", "https://nvbugs/1", None, 2),
        ("tests/test_top.py::test_two", "XFAIL", "https://nvbugs/2", None, 3),
        ("tests/gpu/test_single.py::test_cuda", "SKIP", "https://nvbugs/3 only on H200", "H200", 5),
    ]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("tests/a.py::t", "expected '<test id> SKIP (reason)'"),
        ("tests/a.py::t WAIVE (x)", "unknown waive kind 'WAIVE'"),
        ("tests/a.py::t SKIP ()", "needs a reason"),
        ("tests/a.py::t SKIP", "expected"),
        ("/abs/a.py::t SKIP (x)", "relative to the repository root"),
        ("tests/a.py::t TIMEOUT (3) SKIP (x)", "TIMEOUT belongs in the stage list"),
    ],
)
def test_malformed_waive_lines_are_refused_with_their_line(tmp_path, line, problem):
    path = tmp_path / "waives.txt"
    path.write_text(f"# header\n{line}\n", encoding="utf-8")
    with pytest.raises(TestListError) as caught:
        load_waives(path)
    assert caught.value.problems[0].line == 2
    assert problem in caught.value.problems[0].message


def test_duplicate_waives_are_refused_but_a_gpu_scoped_twin_is_not(tmp_path):
    path = tmp_path / "waives.txt"
    path.write_text("a.py::t SKIP (1)\nfull:B200/a.py::t SKIP (2)\na.py::t XFAIL (3)\n")
    with pytest.raises(TestListError, match=r":3: 'a.py::t' is already waived at line 1"):
        load_waives(path)


@pytest.mark.parametrize(
    ("scope", "names", "matches"),
    [
        ("H200", ["H200"], True),
        ("H200", ["NVIDIA H200"], True),
        ("h100_pcie", ["NVIDIA H100 PCIe"], True),
        ("H100_PCIe", ["NVIDIA H100 80GB HBM3"], False),
        ("H200", ["NVIDIA GH200 480GB"], False),  # whole words only
        ("B200", [], False),
    ],
)
def test_gpu_scope_matching_is_by_whole_words(scope, names, matches):
    assert gpu_matches(scope, names) is matches


def test_scoped_waives_apply_only_on_their_gpu():
    waives = load_waives(GOOD)
    on_h200 = applicable(waives, ["NVIDIA H200"])
    on_b200 = applicable(waives, ["NVIDIA B200"])
    assert len(on_h200) == 3 and len(on_b200) == 2
    assert waive_for("tests/gpu/test_single.py::test_cuda", on_b200) is None
    assert waive_for("tests/gpu/test_single.py::test_cuda", on_h200).gpu == "H200"


def test_the_most_specific_waive_wins(tmp_path):
    path = tmp_path / "waives.txt"
    path.write_text(
        "tests SKIP (all)\ntests/a.py::C SKIP (class)\ntests/a.py::C::t[1] XFAIL (one)\n"
    )
    waives = load_waives(path)
    assert waive_for("tests/a.py::C::t[1]", waives).reason == "one"
    assert waive_for("tests/a.py::C::t[2]", waives).reason == "class"
    assert waive_for("tests/b.py::t", waives).reason == "all"
    assert waive_for("other/b.py::t", waives) is None
