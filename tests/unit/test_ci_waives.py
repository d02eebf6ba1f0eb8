"""Waive lists: upstream's grammar, line numbers, ``full:X/`` stage scoping, which waive wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from regress.ci.testlist import TestListError
from regress.ci.waives import applicable, load_waives, scope_matches, waive_for

DATA = Path(__file__).resolve().parents[1] / "data" / "testlists"
GOOD = DATA / "good" / "waives.txt"
GRAMMAR = DATA / "grammar" / "waives.txt"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "waives.txt"
    path.write_text(text, encoding="utf-8")
    return path


def test_fixture_waives_parse_with_kinds_reasons_scopes_and_lines():
    waives = load_waives(GOOD)
    assert [(w.test_id, w.kind, w.reason, w.scope, w.line) for w in waives] == [
        ("tests/unit/test_u.py::test_b[2]", "SKIP", "https://nvbugs/1", None, 2),
        ("tests/test_top.py::test_two", "XFAIL", "https://nvbugs/2", None, 3),
        ("tests/gpu/test_single.py::test_cuda", "SKIP", "https://nvbugs/3 only on H200", "H200", 5),
    ]


def test_every_construct_of_the_grammar_parses():
    by_line = {}
    for w in load_waives(GRAMMAR):
        by_line.setdefault(w.line, []).append(w)
    reasonless = by_line[5][0]
    assert (reasonless.kind, reasonless.reason) == ("SKIP", None)
    commented = by_line[6][0]  # "SKIP # ..." : the comment is not a reason
    assert (commented.test_id, commented.kind, commented.reason) == (
        "tests/test_top.py::test_one",
        "SKIP",
        None,
    )
    assert by_line[8][0].kind == "UNSTABLE"
    assert (by_line[9][0].markexpr, by_line[9][0].kind) == ("trtllm", "SKIP")
    timeout = by_line[10][0]
    assert (timeout.keyword, timeout.kind, timeout.timeout_minutes) == ("GLM52", None, 5)
    assert by_line[11][0].isolation and by_line[11][0].kind is None
    multi = by_line[12]  # one line, two paths, one scope
    assert [(w.test_id, w.scope, w.line) for w in multi] == [
        ("tests/gpu", "B200", 12),
        ("tests/unit", "B200", 12),
    ]
    assert by_line[13][0].scope == "sm100"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("tests/a.py::t", "no marker in 'tests/a.py::t'"),
        ("tests/a.py::t WAIVE (x)", "unknown marker 'WAIVE'"),
        ("tests/a.py::t skip (x)", "markers are case-sensitive: write 'SKIP'"),
        ("tests/a.py::t SKIP because", "unexpected 'because'"),
        ("tests/a.py::t SKIP (x", "unbalanced parenthesis"),
        ("tests/a.py::t SKIP (a) XFAIL (b)", "separate markers with ','"),
        ("tests/a.py::t SKIP (a), XFAIL (b)", "two outcome markers"),
        ("tests/a.py::t TIMEOUT (soon)", "TIMEOUT needs a positive whole number"),
        ("tests/a.py::t TIMEOUT", "TIMEOUT needs a positive whole number"),
        ("tests/a.py::t ISOLATION (1)", "ISOLATION takes no value"),
        ('tests/a.py -k "a and" SKIP', "is not a pytest expression"),
        ('tests/a.py -x "a" SKIP', "unknown option '-x'"),
        ("tests/a.py::t ISOLATED", "unknown marker 'ISOLATED'"),
        # a misspelt marker with a slash looks like a second path; its capitals say it is not
        # (mutation guarded: `word.isupper()` dropped from ci/listline.py's path loop)
        ("tests/a.py SKIP/", "unknown marker 'SKIP/'"),
        ("tests/a.py::t XFAIL/ (r)", "unknown marker 'XFAIL/'"),
        ("tests/a.py notapath SKIP", "unexpected 'notapath'"),
        ("/abs/a.py::t SKIP (x)", "relative to the repository root"),
        ("full:B200/../a.py SKIP (x)", "relative to the repository root"),
    ],
)
def test_malformed_waive_lines_are_refused_with_their_line_and_construct(tmp_path, line, problem):
    with pytest.raises(TestListError) as caught:
        load_waives(write(tmp_path, f"# header\n{line}\n"))
    [found] = caught.value.problems
    assert found.line == 2
    assert problem in found.message
    assert str(tmp_path / "waives.txt") == found.source


def test_nothing_after_the_id_is_silently_absorbed_into_it(tmp_path):
    # The defect: a regex taking everything before the marker as the id turned
    # "x ISOLATION SKIP (r)" style typos into a test id with spaces that waives nothing.
    waives = load_waives(write(tmp_path, "tests/a.py::t[p q] SKIP (r)\n"))
    assert [w.test_id for w in waives] == ["tests/a.py::t[p q]"]  # spaces inside [] are the id's
    with pytest.raises(TestListError, match="unexpected 'extra'"):
        load_waives(write(tmp_path, "tests/a.py::t extra SKIP (r)\n"))


def test_duplicate_waives_are_refused_but_scoped_and_filtered_twins_are_not(tmp_path):
    text = (
        "a.py::t SKIP (1)\nfull:B200/a.py::t SKIP (2)\na.py::t -k x SKIP (3)\na.py::t XFAIL (4)\n"
    )
    with pytest.raises(TestListError, match=r":4: 'a.py::t' is already waived at line 1"):
        load_waives(write(tmp_path, text))


@pytest.mark.parametrize(
    ("scope", "stage", "matches"),
    [
        ("B200", "B200-PyTorch-1", True),
        ("B200", "DGX_B200-PyTorch-1", False),  # upstream compares the first '-' part only
        ("DGX_B200", "DGX_B200-4_GPUs-PyTorch-1", True),
        ("sm100", "sm100-PyTorch-1", True),
        ("sm100", "B200-PyTorch-1", False),
        ("H200", "GH200-PyTorch-1", False),
        ("H20-3e", "H20-3e-PyTorch-1", False),  # "H20-3e" is not one dash part: never matches
        ("b200", "B200-PyTorch-1", False),  # case-sensitive, as upstream's `in`
        ("B200", None, False),  # no --test-prefix: scoped waives name no test upstream
    ],
)
def test_full_scope_is_the_first_dash_part_of_the_test_prefix(scope, stage, matches):
    assert scope_matches(scope, stage) is matches


def test_scoped_waives_apply_only_in_their_stages():
    waives = load_waives(GOOD)
    in_h200 = applicable(waives, "H200-1")
    in_b200 = applicable(waives, "B200-4")
    assert len(in_h200) == 3 and len(in_b200) == 2
    assert waive_for("tests/gpu/test_single.py::test_cuda", in_b200) is None
    assert waive_for("tests/gpu/test_single.py::test_cuda", in_h200).scope == "H200"


def test_the_most_specific_waive_wins(tmp_path):
    waives = load_waives(
        write(
            tmp_path,
            "tests SKIP (all)\ntests/a.py::C SKIP (class)\ntests/a.py::C::t[1] XFAIL (one)\n",
        )
    )
    assert waive_for("tests/a.py::C::t[1]", waives).reason == "one"
    assert waive_for("tests/a.py::C::t[2]", waives).reason == "class"
    assert waive_for("tests/b.py::t", waives).reason == "all"
    assert waive_for("other/b.py::t", waives) is None


@pytest.mark.parametrize("order", ["unscoped first", "scoped first"])
def test_at_the_same_id_a_scoped_waive_beats_an_unscoped_one(tmp_path, order):
    # Both orders: the rule must not be "first line wins" dressed up as a tie-break.
    lines = ["a.py::t XFAIL (everywhere)", "full:B200/a.py::t SKIP (on B200)"]
    if order == "scoped first":
        lines.reverse()
    waives = applicable(load_waives(write(tmp_path, "\n".join(lines) + "\n")), "B200-PyTorch-1")
    chosen = waive_for("a.py::t", waives)
    assert (chosen.scope, chosen.reason) == ("B200", "on B200")
    elsewhere = applicable(load_waives(write(tmp_path, "\n".join(lines) + "\n")), "H200-1")
    assert waive_for("a.py::t", elsewhere).reason == "everywhere"


def test_a_more_specific_unscoped_waive_beats_a_scoped_file_waive(tmp_path):
    text = "full:B200/a.py SKIP (file on B200)\na.py::t XFAIL (this test)\n"
    waives = applicable(load_waives(write(tmp_path, text)), "B200-1")
    assert waive_for("a.py::t", waives).reason == "this test"
    assert waive_for("a.py::u", waives).reason == "file on B200"


def test_filters_decide_through_the_admits_callback(tmp_path):
    waives = load_waives(write(tmp_path, 'a.py -k "slow" SKIP (slow ones)\na.py XFAIL (rest)\n'))
    slow = waive_for("a.py::test_slow", waives, admits=lambda w: w.keyword is None or True)
    assert slow.reason == "slow ones"
    fast = waive_for("a.py::test_fast", waives, admits=lambda w: w.keyword is None)
    assert fast.reason == "rest"
