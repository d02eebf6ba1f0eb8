"""Test-db lists: parsing with file:line errors, stage selection, id matching, validation, CLI."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from _ci_project import write_project
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from regress.ci.selection import nodeid_keys, select, suggestions
from regress.ci.stages import StageLists, load_stages, resolve_entries
from regress.ci.testlist import Entry, Stage, TestListError, load_test_db
from regress.ci.validation import parse_collect_output, validate
from regress.cli import cli
from regress.errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data" / "testlists"
GOOD = DATA / "good"
BAD = DATA / "bad"
REPO = Path(__file__).resolve().parents[2]


def problems_of(exc: TestListError) -> list[tuple[str, int, str]]:
    return [(Path(p.source).name, p.line, p.message) for p in exc.problems]


def test_good_lists_load_with_every_stage_selecting_something():
    lists = StageLists.load(GOOD)
    assert list(lists.stages) == ["CPU-1", "H200-1", "B200-4", "B200-4-Post-Merge"]
    assert lists.consistency_problems() == []
    assert [e.render() for e in lists.entries("CPU-1")] == [
        "tests/unit",
        "tests/test_top.py::test_one TIMEOUT (2)",
    ]
    assert [e.test_id for e in lists.entries("H200-1")] == ["tests/gpu/test_single.py"]
    b200 = lists.entries("B200-4")
    assert [(e.test_id, e.timeout_minutes) for e in b200] == [
        ("tests/gpu/test_multi.py::TestGLM52", 90),
        ("tests/gpu/test_multi.py::TestDeepSeekV32::test_al", None),
    ]
    assert [e.test_id for e in lists.entries("B200-4-Post-Merge")] == ["tests/gpu"]
    assert lists.stages["B200-4-Post-Merge"].pytest_args == ("-x",)


def test_entries_remember_file_and_line():
    entry = StageLists.load(GOOD).entries("B200-4")[0]
    assert (Path(entry.source).name, entry.line) == ("l0_gpu.yml", 25)


def test_bad_test_db_reports_every_problem_with_its_line():
    with pytest.raises(TestListError) as caught:
        load_test_db(BAD / "l0_cpu.yml")
    got = problems_of(caught.value)
    assert [(name, line) for name, line, _ in got] == [
        ("l0_cpu.yml", 3),
        ("l0_cpu.yml", 10),
        ("l0_cpu.yml", 13),
        ("l0_cpu.yml", 17),
        ("l0_cpu.yml", 18),
        ("l0_cpu.yml", 19),
        ("l0_cpu.yml", 20),
    ]
    messages = "\n".join(m for *_, m in got)
    assert "'condtion'" in messages and "did you mean 'condition'" in messages
    assert "did you mean 'system_gpu_count'" in messages
    assert "did you mean 'pre_merge'" in messages
    assert "duplicate entry" in messages and "first at line 16" in messages
    assert "unknown marker 'ISOLATED'" in messages
    assert messages.count("relative to the repository root") == 2


def test_bad_stages_report_types_terms_and_unknown_keys_with_lines():
    with pytest.raises(TestListError) as caught:
        load_stages(BAD / "stages.yml")
    got = problems_of(caught.value)
    assert [line for _, line, _ in got] == [6, 13, 17, 15]
    assert "gpu_count must be a plain decimal integer" in got[0][2]
    assert "did you mean 'gpu_type'" in got[2][2]
    assert "lacks gpu_type, gpu_count, stage, backend" in got[3][2]


def test_error_message_is_file_colon_line():
    with pytest.raises(TestListError) as caught:
        load_test_db(BAD / "l0_cpu.yml")
    first = str(caught.value).splitlines()[0]
    assert first.startswith(f"{BAD / 'l0_cpu.yml'}:3: unknown key 'condtion'")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "file is empty"),
        ("l0_x: [\n", "invalid YAML"),
        ("a: &x [1]\nb: *x\n", "aliases are not supported"),
        ("version: 1\nversion: 2\nl0: []\n", "duplicate key 'version'"),
        ("- 1\n", "must be a mapping"),
        ("version: 1\n", "no context key"),
        ("l0:\n- tests: tests/unit\n", "tests must be a list"),
        ("l0:\n- tests: [1]\n", "must be a non-empty string"),
        (
            "l0:\n- condition: {ranges: {system_gpu_count: {gte: 2, lte: 1}}}\n  tests: [a]\n",
            "is empty",
        ),
        ("l0:\n- condition: {ranges: {system_gpu_count: {gte: yes}}}\n  tests: [a]\n", "a number"),
        ("l0:\n- condition: {terms: {backend: torch}}\n  tests: [a]\n", "did you mean 'pytorch'"),
        ("l0:\n- condition: {terms: {suports_fp8: true}}\n  tests: [a]\n", "'supports_fp8'"),
        ("l0:\n- condition: {terms: {cpu: [x86_64]}}\n  tests: [a]\n", "a single value"),
        (
            "l0:\n- condition: {ranges: {system_gpu_count: {gte: 1, lt: 1}}}\n  tests: [a]\n",
            "empty",
        ),
        ("l0:\n- condition: {ranges: {system_gpu_count: {eq: 1}}}\n  tests: [a]\n", "'eq'"),
        ("l0:\n- tests: ['a.py SKIP (x)']\n", "SKIP is a waive"),
        ("l0:\n- tests: ['a.py TIMEOUT (1) TIMEOUT (2)']\n", "separate markers"),
        ("l0:\n- tests: ['a.py TIMEOUT (1), TIMEOUT (2)']\n", "TIMEOUT given twice"),
        ("l0:\n- tests: ['a.py ISOLATION,']\n", "must not end with ','"),
        ("l0:\n- tests: ['a.py , ISOLATION']\n", "stray ','"),
        ("l0:\n- tests: ['a.py -k']\n", "-k needs an expression"),
        ('l0:\n- tests: [\'a.py -m "x" -m "y"\']\n', "-m given twice"),
        ("l0:\n- tests: ['a.py -k \"x']\n", "unbalanced quote"),
        ("l0:\n- tests: ['full:B200/a.py']\n", "belongs in waives"),
        ("l0:\n- condition: {}\n", "has no 'tests' list"),
        ("l0-bad:\n- tests: [a]\n", "must be an identifier"),
    ],
)
def test_malformed_test_db_is_refused_with_a_reason(tmp_path, text, problem):
    path = tmp_path / "l0.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TestListError) as caught:
        load_test_db(path)
    assert problem in str(caught.value)


def test_plain_txt_lists_are_read_line_by_line(tmp_path):
    path = tmp_path / "rendered.txt"
    path.write_text("# rendered\ntests/a.py::test_x TIMEOUT (5)\n\n./tests/b/\n", encoding="utf-8")
    db = load_test_db(path)
    assert [(e.test_id, e.timeout_minutes, e.line) for e in db.entries()] == [
        ("tests/a.py::test_x", 5, 2),
        ("tests/b", None, 4),
    ]


STAGE = Stage("S", "l0", gpu_type="H200", gpu_count=1, stage="pre_merge", backend="pytorch")


def condition(text: str):
    import yaml

    from regress.ci.conditions import parse_condition
    from regress.ci.yamlnodes import NodeReader

    reader = NodeReader("inline")
    parsed = parse_condition(reader, yaml.compose(text))
    assert reader.problems == []
    return parsed


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("{}", True),
        ("{ranges: {system_gpu_count: {gte: 1, lte: 1}}}", True),
        ("{ranges: {system_gpu_count: {gte: 2}}}", False),
        ("{ranges: {system_gpu_count: {lte: 0}}}", False),
        ("{ranges: {system_gpu_count: {gt: 0, lt: 2}}}", True),
        ("{ranges: {system_gpu_count: {gt: 1}}}", False),
        ("{wildcards: {gpu: ['*h200*']}}", True),
        ("{wildcards: {gpu: '*H200*'}}", True),
        ("{wildcards: {gpu: ['*h100*', '*b200*']}}", False),
        ("{wildcards: {linux_distribution_name: 'ubuntu*'}}", False),  # a fact S does not declare
        ("{terms: {stage: pre_merge, backend: pytorch}}", True),
        ("{terms: {stage: post_merge}}", False),
        ("{terms: {orchestrator: mpi}}", False),  # undeclared: a stage's facts are complete
    ],
)
def test_conditions_are_matched_against_the_stages_declared_facts(text, matches):
    assert condition(text).matches(STAGE.facts()) is matches


@pytest.mark.parametrize(
    ("text", "facts", "exact", "matches"),
    [
        # trt-test-db queries as Jenkins writes them: numbers and booleans arrive as strings.
        ("{ranges: {system_gpu_count: {gte: 4, lte: 4}}}", {"system_gpu_count": "4"}, True, True),
        ("{ranges: {system_gpu_count: {gte: 4, lte: 4}}}", {"system_gpu_count": "8"}, True, False),
        ("{ranges: {compute_capability: {gte: 8.9}}}", {"compute_capability": 9.0}, True, True),
        ("{ranges: {compute_capability: {gte: 8.9}}}", {"compute_capability": "8.6"}, True, False),
        ("{ranges: {system_gpu_count: {gte: 1}}}", {"system_gpu_count": "many"}, True, False),
        ("{terms: {supports_fp8: true}}", {"supports_fp8": True}, True, True),
        ("{terms: {supports_fp8: true}}", {"supports_fp8": "True"}, True, True),
        ("{terms: {supports_fp8: true}}", {"supports_fp8": False}, True, False),
        ("{terms: {supports_fp8: true}}", {"supports_fp8": "1"}, True, False),
        ("{terms: {system_gpu_count: 8}}", {"system_gpu_count": "8"}, True, True),
        ("{terms: {orchestrator: mpi}}", {"orchestrator": "mpi"}, True, True),
        ("{terms: {orchestrator: mpi}}", {"orchestrator": "ray"}, True, False),
        ("{terms: {orchestrator: mpi}}", {"orchestrator": "MPI"}, True, False),
        ("{terms: {orchestrator: mpi}}", {}, True, False),
        ("{terms: {orchestrator: mpi}}", {}, False, True),  # --match: unspecified facts pass
        ("{wildcards: {cpu: x86_64}}", {"cpu": "x86_64"}, True, True),
        ("{wildcards: {cpu: x86_64}}", {"cpu": "aarch64"}, False, False),
        ("{wildcards: {gpu: ['*b200*']}}", {"gpu": "B200"}, True, True),
        ("{wildcards: {gpu: ['*b200*']}}", {"gpu": "GB200"}, True, True),  # as upstream's pattern
        ("{wildcards: {gpu: ['*b200*']}}", {"gpu": None}, False, False),
        ("{wildcards: {is_linux: 'tr*'}}", {"is_linux": True}, True, True),
    ],
)
def test_condition_values_are_compared_as_upstream_passes_them(text, facts, exact, matches):
    assert condition(text).matches(facts, exact=exact) is matches


GRAMMAR = DATA / "grammar" / "l0_grammar.yml"
B200_FACTS = {
    "gpu": "B200",
    "system_gpu_count": "8",
    "stage": "pre_merge",
    "backend": "pytorch",
    "orchestrator": "mpi",
    "supports_fp8": True,
    "cpu": "x86_64",
    "linux_distribution_name": "ubuntu",
}


def test_every_test_db_construct_parses_to_what_it_says():
    db = load_test_db(GRAMMAR)
    rendered = [e.render() for e in db.select("l0_grammar", B200_FACTS)]
    assert rendered == [
        'tests/gpu/test_multi.py -k "GLM52 and not DeepSeek"',
        'tests/gpu/test_multi.py -m "gpu"',
        "tests/gpu/test_single.py::test_cuda ISOLATION",
        "tests/gpu/test_single.py::test_trt TIMEOUT (20)",
        "tests/unit/test_u.py::test_a ISOLATION, TIMEOUT (120)",
        "tests/unit/test_u.py::test_b ISOLATION, TIMEOUT (90)",
        "tests/test_top.py",
        "tests/unit",
    ]
    lines = [e.line for e in db.select("l0_grammar", B200_FACTS)]
    assert lines[-2] == lines[-1]  # the two paths of one multi-path line


@pytest.mark.parametrize(
    ("facts", "exact", "expected"),
    [
        (B200_FACTS, True, 8),
        ({**B200_FACTS, "gpu": "GB300"}, True, 8),
        ({**B200_FACTS, "supports_fp8": "false"}, True, 0),
        ({**B200_FACTS, "orchestrator": "ray"}, True, 0),
        ({**B200_FACTS, "system_gpu_count": "2"}, True, 0),
        ({"gpu": "B200", "system_gpu_count": "4"}, True, 0),
        ({"gpu": "B200", "system_gpu_count": "4"}, False, 8),
        ({"stage": "post_merge", "system_gpu_count": "1", "compute_capability": "9.0"}, True, 1),
        ({"stage": "post_merge"}, False, 1),
        ({}, False, 9),
    ],
)
def test_a_context_query_selects_blocks_like_trt_test_db(facts, exact, expected):
    assert len(load_test_db(GRAMMAR).select("l0_grammar", facts, exact=exact)) == expected


def test_a_test_db_folder_without_stages_yml_is_read_as_it_is(tmp_path):
    shutil.copy(GRAMMAR, tmp_path / "l0_grammar.yml")
    lists = StageLists.load(tmp_path)
    assert lists.stages == {} and list(lists.dbs) == ["l0_grammar"]
    assert lists.consistency_problems() == []
    assert len(lists.query("l0_grammar", B200_FACTS, exact=True)) == 8
    with pytest.raises(UsageError, match=r"no stages.yml, so no stage 'X'.*--context NAME --match"):
        lists.stage("X")
    with pytest.raises(UsageError, match=r"defines context 'l0_grammer'; closest: l0_grammar"):
        lists.context("l0_grammer")


def test_cli_show_with_a_context_query_on_a_folder_without_stages(tmp_path):
    shutil.copy(GRAMMAR, tmp_path / "l0_grammar.yml")
    run = CliRunner().invoke
    args = ["testlist", "show", "--dir", str(tmp_path), "--context", "l0_grammar"]
    exact = run(cli, [*args, "--match-exact", json.dumps(B200_FACTS)])
    assert exact.exit_code == 0, exact.output
    assert exact.output.splitlines()[2] == "tests/gpu/test_single.py::test_cuda ISOLATION"
    loose = run(cli, [*args, "--match", '{"gpu": "B200", "system_gpu_count": "8"}'])
    assert loose.exit_code == 0 and len(loose.output.splitlines()) == 8
    listed = run(cli, ["testlist", "show", "--dir", str(tmp_path)])
    assert listed.output.startswith("l0_grammar  (")
    bad = run(cli, [*args, "--match", "{not json"])
    assert bad.exit_code == 2 and "--match: not JSON" in bad.output
    both = run(cli, [*args, "--match", "{}", "--match-exact", "{}"])
    assert both.exit_code == 2 and "not both" in both.output
    out = tmp_path / "out" / "q.json"
    written = run(cli, [*args, "--match", "{}", "--json", str(out)])
    assert written.exit_code == 0 and json.loads(out.read_text())["context"] == "l0_grammar"


def test_cli_show_json_path_is_checked_before_any_work(tmp_path):
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o500)
    try:
        result = CliRunner().invoke(
            cli,
            [
                "testlist",
                "show",
                "--dir",
                str(tmp_path / "missing"),
                "--json",
                str(tmp_path / "ro" / "x.json"),
            ],
        )
    finally:
        (tmp_path / "ro").chmod(0o700)
    if os.geteuid() == 0:  # root can write anywhere: point at a folder instead
        result = CliRunner().invoke(
            cli, ["testlist", "show", "--dir", str(tmp_path / "missing"), "--json", str(tmp_path)]
        )
    assert result.exit_code == 2
    assert "--json" in result.output and "missing" not in result.output  # before loading lists


def test_cli_validate_syntax_only_on_a_folder_whose_paths_are_elsewhere(tmp_path):
    shutil.copy(GRAMMAR, tmp_path / "l0_grammar.yml")
    shutil.copy(DATA / "grammar" / "waives.txt", tmp_path / "waives.txt")
    run = CliRunner().invoke
    ok = run(cli, ["testlist", "validate", "--dir", str(tmp_path), "--syntax-only"])
    assert ok.exit_code == 0, ok.output
    paths = run(cli, ["testlist", "validate", "--dir", str(tmp_path), "--no-collect"])
    assert paths.exit_code == 2 and "does not exist" in paths.output
    (tmp_path / "waives.txt").write_text("a.py::t SKIP (x) trailing\n")
    broken = run(cli, ["testlist", "validate", "--dir", str(tmp_path), "--syntax-only"])
    assert broken.exit_code == 2 and "waives.txt:1: unexpected 'trailing'" in broken.output


def test_nodeid_keys_walk_from_the_id_up_to_its_directories():
    assert nodeid_keys("a/b/t.py::C::f[x::y]") == [
        "a/b/t.py::C::f[x::y]",
        "a/b/t.py::C::f",
        "a/b/t.py::C",
        "a/b/t.py",
        "a/b",
        "a",
    ]


IDS = [
    "tests/unit/test_u.py::test_a",
    "tests/unit/test_u.py::test_b[1]",
    "tests/unit/test_u.py::test_b[2]",
    "tests/test_top.py::test_one",
    "tests/test_top.py::test_one_more",
    "tests/gpu/test_multi.py::TestGLM52::test_al",
]


def entry(test_id: str, timeout: int | None = None) -> Entry:
    return Entry(test_id, timeout, "l0.yml", 1)


@pytest.mark.parametrize(
    ("test_id", "selected"),
    [
        ("tests/unit", [0, 1, 2]),
        ("tests/unit/test_u.py::test_b", [1, 2]),
        ("tests/unit/test_u.py::test_b[2]", [2]),
        ("tests/test_top.py::test_one", [3]),  # not test_one_more: ids match whole parts
        ("tests/gpu/test_multi.py::TestGLM52", [5]),
        ("tests/uni", []),  # not a prefix of a path part either
    ],
)
def test_select_matches_ids_files_and_directories_by_whole_parts(test_id, selected):
    assert select([entry(test_id)], IDS).selected == selected


def test_select_keeps_collection_order_and_the_most_specific_timeout():
    entries = [entry("tests/test_top.py::test_one", 5), entry("tests", 60)]
    result = select(entries, IDS)
    assert result.selected == list(range(len(IDS)))
    assert result.entry_for[3].timeout_minutes == 5
    assert result.entry_for[0].timeout_minutes == 60
    assert result.unmatched == []


def test_unmatched_entries_come_with_the_closest_collected_ids():
    missing = entry("tests/unit/test_u.py::test_c")
    result = select([missing], IDS)
    assert result.unmatched == [missing]
    assert "tests/unit/test_u.py::test_a" in suggestions(missing.test_id, IDS)
    assert select([missing], IDS, required=lambda e: False).unmatched == []


@given(st.lists(st.sampled_from(IDS), unique=True))
def test_selecting_exact_ids_selects_exactly_them(chosen):
    result = select([entry(i) for i in chosen], IDS)
    assert [IDS[i] for i in result.selected] == [i for i in IDS if i in chosen]


def test_resolve_entries_from_a_file_with_and_without_stage():
    entries, stage, _ = resolve_entries(GOOD / "l0_gpu.yml", "H200-1")
    assert stage.name == "H200-1" and [e.test_id for e in entries] == ["tests/gpu/test_single.py"]
    everything, stage, _ = resolve_entries(GOOD / "l0_gpu.yml", None)
    assert stage is None and len(everything) == 4


def test_resolve_entries_from_a_directory_needs_a_stage():
    entries, stage, source = resolve_entries(GOOD, "CPU-1")
    assert source.endswith("l0_cpu.yml") and len(entries) == 2 and stage.name == "CPU-1"
    with pytest.raises(UsageError, match="also give --stage"):
        resolve_entries(GOOD, None)


@pytest.mark.parametrize(
    ("path", "stage", "message"),
    [
        ("l0_gpu.yml", "H200-2", "closest: H200-1"),
        ("l0_gpu.yml", "CPU-1", "does not define"),
        ("missing.yml", None, "no such file"),
    ],
)
def test_resolve_entries_errors_say_what_to_do(path, stage, message):
    with pytest.raises(UsageError, match=message):
        resolve_entries(GOOD / path, stage)


def test_consistency_flags_stages_without_tests_and_unreachable_blocks(tmp_path):
    lists = write_project(tmp_path)
    stages = (lists / "stages.yml").read_text().replace("gpu_type: H200", "gpu_type: H100")
    (lists / "stages.yml").write_text(stages)
    problems = [p.message for p in StageLists.load(lists).consistency_problems()]
    assert any("stage 'H200-1' selects no tests" in p for p in problems)
    assert any("no stage of 'l0_gpu' matches this block" in p for p in problems)


def test_validate_passes_on_a_consistent_project(tmp_path):
    lists = write_project(tmp_path)
    assert validate(lists, root=tmp_path) == []


def test_validate_fails_on_a_list_naming_a_missing_test(tmp_path):
    lists = write_project(tmp_path)
    text = (
        (lists / "l0_gpu.yml")
        .read_text()
        .replace("TestDeepSeekV32::test_al", "TestDeepSeekV32::test_gone")
    )
    (lists / "l0_gpu.yml").write_text(text)
    problems = validate(lists, root=tmp_path)
    assert [(Path(p.source).name, p.line) for p in problems] == [("l0_gpu.yml", 26)]
    assert "test_gone' is not collected" in problems[0].message
    assert "TestDeepSeekV32::test_al" in problems[0].message


def test_validate_flags_missing_paths_and_stale_waives(tmp_path):
    lists = write_project(tmp_path)
    (tmp_path / "tests/gpu/test_single.py").unlink()
    with (lists / "waives.txt").open("a") as handle:
        handle.write("tests/test_top.py::test_three SKIP (https://nvbugs/9)\n")
    problems = [(Path(p.source).name, p.line, p.message) for p in validate(lists, root=tmp_path)]
    assert problems[0][:2] == ("l0_gpu.yml", 15)
    assert "tests/gpu/test_single.py does not exist" in problems[0][2]
    assert "closest: tests/gpu/test_multi.py" in problems[0][2]
    assert any(
        name == "waives.txt" and "test_three' is not collected" in m for name, _, m in problems
    )


def test_validate_reports_files_pytest_cannot_collect(tmp_path):
    lists = write_project(tmp_path)
    (tmp_path / "tests/gpu/test_multi.py").write_text("import no_such_module_here\n")
    problems = validate(lists, root=tmp_path)
    assert problems and all("cannot collect tests/gpu/test_multi.py" in p.message for p in problems)


def test_validate_collects_only_when_asked(tmp_path):
    lists = write_project(tmp_path)
    calls = []
    validate(lists, root=tmp_path, collect=False, run=lambda argv, cwd: calls.append(argv))
    assert calls == []


def test_parse_collect_output_reads_ids_and_errors():
    output = (
        "a.py::test_x\nb.py::C::test_p[c::d]\n\n=== ERRORS ===\n"
        "=========================== short test summary info ============================\n"
        "ERROR c.py - ModuleNotFoundError: No module named 'x'\n"
        "3 tests collected, 1 error in 0.5s\n"
    )
    collected = parse_collect_output(2, output)
    assert collected.ids == ["a.py::test_x", "b.py::C::test_p[c::d]"]
    assert collected.broken == {"c.py": "ModuleNotFoundError: No module named 'x'"}
    assert collected.failure is None
    assert parse_collect_output(4, "ERROR: file or directory not found: x\n").failure


def test_cli_show_lists_stages_and_a_stages_entries():
    runner = CliRunner()
    listed = runner.invoke(cli, ["testlist", "show", "--dir", str(GOOD)])
    assert listed.exit_code == 0
    assert "B200-4  (4x B200, pre_merge, l0_gpu: 2 entries)" in listed.output
    shown = runner.invoke(cli, ["testlist", "show", "--dir", str(GOOD), "--stage", "CPU-1"])
    assert shown.output.splitlines() == ["tests/unit", "tests/test_top.py::test_one TIMEOUT (2)"]


def test_cli_show_unknown_stage_exits_2_with_closest_names():
    result = CliRunner().invoke(cli, ["testlist", "show", "--dir", str(GOOD), "--stage", "B200-5"])
    assert result.exit_code == 2
    assert "closest: B200-4" in result.output


def test_cli_validate_exit_codes(tmp_path):
    lists = write_project(tmp_path)
    runner = CliRunner()
    ok = runner.invoke(cli, ["testlist", "validate", "--dir", str(lists)])
    assert ok.exit_code == 0, ok.output
    (lists / "l0_cpu.yml").write_text((BAD / "l0_cpu.yml").read_text())
    bad = runner.invoke(cli, ["testlist", "validate", "--dir", str(lists), "--no-collect"])
    assert bad.exit_code == 2
    assert "l0_cpu.yml:3: unknown key 'condtion'" in bad.output


def test_repository_lists_parse_and_every_stage_selects_tests():
    # The collecting half of `regress testlist validate` runs in CI against the real tree; here
    # only what does not depend on other people's files being present yet.
    lists = StageLists.load(REPO / "test-lists")
    assert lists.consistency_problems() == []
    assert {"CPU-PyTorch-1", "H200-PyTorch-1", "DGX_B200-8_GPUs-PyTorch-1"} <= set(lists.stages)
    assert any(s.post_merge for s in lists.stages.values())
    assert [e.test_id for e in lists.entries("CPU-PyTorch-1")] == ["tests/unit"]


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=8)


@given(
    path=st.lists(_WORD, min_size=1, max_size=3).map(lambda p: "/".join(p) + ".py"),
    names=st.lists(_WORD, max_size=2),
    params=st.one_of(st.none(), st.text(alphabet="abc-=:. 12", min_size=1, max_size=10)),
    keyword=st.one_of(st.none(), _WORD.map(lambda w: f"k{w} and not slow")),
    markexpr=st.one_of(st.none(), _WORD.map(lambda w: f"m{w} or gpu")),
    timeout=st.one_of(st.none(), st.integers(1, 600)),
    isolation=st.booleans(),
)
def test_an_entry_renders_to_a_line_that_parses_back_to_it(
    path, names, params, keyword, markexpr, timeout, isolation
):
    from regress.ci.testlist import parse_entry

    test_id = "::".join([path, *names]) + (f"[{params}]" if params and names else "")
    entry = Entry(test_id, timeout, "f.yml", 3, keyword, markexpr, isolation)
    assert parse_entry(entry.render(), "f.yml", 3) == [entry]


def test_a_stage_declares_further_facts_for_upstream_style_conditions(tmp_path):
    shutil.copy(GRAMMAR, tmp_path / "l0_grammar.yml")
    stage = (
        "    test_db: l0_grammar\n    gpu_type: B200\n    gpu_count: 8\n"
        "    stage: pre_merge\n    backend: pytorch\n    linux_distribution_name: ubuntu\n"
    )
    facts = "    facts: {orchestrator: mpi, cpu: x86_64, supports_fp8: true}\n"
    (tmp_path / "stages.yml").write_text(
        f"stages:\n  B200-MPI:\n{stage}{facts}  B200-bare:\n{stage}", encoding="utf-8"
    )
    lists = StageLists.load(tmp_path)
    assert len(lists.entries("B200-MPI")) == 8
    assert lists.entries("B200-bare") == []  # a declared stage's facts are complete: no guessing
    assert any(
        "B200-bare" in p.message and "selects no tests" in p.message
        for p in lists.consistency_problems()
    )
    (tmp_path / "stages.yml").write_text(
        f"stages:\n  B200-MPI:\n{stage}    facts: {{cpu: [x86_64]}}\n", encoding="utf-8"
    )
    with pytest.raises(TestListError, match=r"facts\.cpu must be a single value"):
        load_stages(tmp_path / "stages.yml")
