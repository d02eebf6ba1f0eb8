"""The pytest plugin, exercised through pytester: markers, selection, waives, GPUs, xdist."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from _ci_project import write_project

from regress.ci import gpu

pytest_plugins = ("pytester",)

LISTS = Path(__file__).resolve().parents[1] / "data" / "testlists" / "good"

GPU_TESTS = 3  # test_cuda and the two count=4 tests
ALL_TESTS = 10


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A small repository with stage lists, isolated from the outer run's xdist and GPUs."""
    write_project(pytester.path, LISTS)
    pytester.makeini("[pytest]\naddopts = -ra --strict-markers\nregress = true\n")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(name, raising=False)
    # not the outer run's options; and no hypothesis plugin (the project has no hypothesis
    # tests), whose import costs each xdist worker the runs start 0.5 CPU s
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # deterministic: no GPU, even on a GPU box
    return pytester


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch):
    """Pretend this process sees ``count`` GPUs of a given name (in-process runs only)."""

    def install(count: int, name: str = "NVIDIA H200") -> None:
        probe = gpu.DeviceProbe(count, (name,) * count, "fake probe")
        monkeypatch.setattr(gpu, "probe_devices", lambda *a, **k: probe)

    return install


def skip_reasons(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("SKIPPED")]


def test_markers_are_registered_and_gpu_tests_skip_with_a_reason(project):
    result = project.runpytest()
    result.assert_outcomes(passed=6, skipped=4)
    reasons = skip_reasons(result)
    assert sum("gpu: needs 1 CUDA device, 0 visible" in r for r in reasons) == 1
    assert sum("gpu: needs 4 CUDA devices, 0 visible" in r for r in reasons) == 2
    assert any("trtllm: the tensorrt_llm package is not installed" in r for r in reasons)
    assert "deselected" not in result.stdout.str()


def test_a_test_missing_gpus_and_tensorrt_llm_names_both_in_its_skip_reason(project):
    project.makepyfile(
        test_both="import pytest\n@pytest.mark.gpu(count=8)\n@pytest.mark.trtllm\ndef test_x(): pass\n"
    )
    result = project.runpytest("test_both.py", "-rs")
    result.assert_outcomes(skipped=1)
    [reason] = skip_reasons(result)
    assert "gpu: needs 8 CUDA devices, 0 visible" in reason
    assert "trtllm: the tensorrt_llm package is not installed" in reason


def test_pytest_m_gpu_reports_every_gpu_test_skipped_with_a_reason(project):
    result = project.runpytest("-m", "gpu", "-rs", "-v")
    result.assert_outcomes(skipped=GPU_TESTS, deselected=ALL_TESTS - GPU_TESTS)
    assert all("CUDA_VISIBLE_DEVICES='' hides every device" in r for r in skip_reasons(result))


def test_gpu_count_is_checked_against_the_visible_devices(project, fake_gpus):
    fake_gpus(1)
    result = project.runpytest("-m", "gpu")
    result.assert_outcomes(passed=1, skipped=2, deselected=ALL_TESTS - GPU_TESTS)
    reasons = skip_reasons(result)
    assert len(reasons) == 2
    assert all(r.endswith("gpu: needs 4 CUDA devices, 1 visible (fake probe)") for r in reasons)


def test_require_gpu_without_a_gpu_fails_the_whole_run(project):
    # The failure --require-gpu exists for: without it, a misconfigured GPU node goes green.
    silent = project.runpytest("-m", "gpu")
    assert silent.ret == pytest.ExitCode.OK
    loud = project.runpytest("-m", "gpu", "--require-gpu")
    assert loud.ret == pytest.ExitCode.USAGE_ERROR
    loud.stderr.fnmatch_lines(
        ["ERROR: --require-gpu: no CUDA device is visible (*hides every device)*"]
    )


def test_require_gpu_with_too_few_gpus_is_an_error_naming_the_tests(project, fake_gpus):
    fake_gpus(1)
    result = project.runpytest("--require-gpu")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*--require-gpu: 2 selected test(s) need up to 4 CUDA devices but 1 are visible*"]
    )
    assert "tests/gpu/test_multi.py::TestGLM52::test_al" in result.stdout.str()
    assert " passed" not in result.stdout.str()


def test_require_gpu_counts_only_selected_tests(project, fake_gpus):
    fake_gpus(1)
    result = project.runpytest("--require-gpu", "-k", "not test_al")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=7, skipped=1, deselected=2)


def test_require_gpu_with_enough_gpus_runs_them(project, fake_gpus):
    fake_gpus(4)
    result = project.runpytest("--require-gpu", "-m", "gpu")
    result.assert_outcomes(passed=GPU_TESTS, deselected=ALL_TESTS - GPU_TESTS)


@pytest.mark.parametrize("count", ["0", "'two'", "True"])
def test_a_malformed_gpu_count_is_a_collection_error(project, count):
    project.makepyfile(
        test_bad=f"import pytest\n@pytest.mark.gpu(count={count})\ndef test_x(): pass\n"
    )
    result = project.runpytest("test_bad.py")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*gpu marker count must be a positive int*"])


def test_trtllm_tests_run_when_the_package_is_findable_and_it_is_never_imported(project):
    package = project.mkpydir("tensorrt_llm")
    (package / "__init__.py").write_text("raise RuntimeError('imported tensorrt_llm')\n")
    project.syspathinsert()
    result = project.runpytest("tests/gpu/test_single.py")
    result.assert_outcomes(passed=1, skipped=1)  # test_trt runs; test_cuda still needs a GPU


def test_test_list_selects_a_stage_and_reports_deselected(project):
    reprec = project.inline_run("--test-list", "test-lists/l0_cpu.yml", "--stage", "CPU-1")
    passed, skipped, failed = reprec.listoutcomes()
    assert [r.nodeid for r in passed] == [
        "tests/test_top.py::test_one",
        "tests/unit/test_u.py::test_a",
        "tests/unit/test_u.py::test_b[1]",
        "tests/unit/test_u.py::test_b[2]",
    ]
    assert not skipped and not failed
    deselected = [
        item.nodeid for call in reprec.getcalls("pytest_deselected") for item in call.items
    ]
    assert deselected == ["tests/test_top.py::test_two"]  # tests/gpu is never even imported


def test_files_the_list_does_not_name_are_not_imported(project):
    # The GPU box lacks packages the CPU tests import (and vice versa): an unlisted module that
    # cannot be imported there must not break the stage.
    (project.path / "tests/gpu/test_needs_missing.py").write_text("import no_such_package_here\n")
    unlisted = project.runpytest("--test-list", "test-lists/l0_cpu.yml", "--stage", "CPU-1")
    unlisted.assert_outcomes(passed=4, deselected=1)
    everything = project.runpytest()
    assert everything.ret == pytest.ExitCode.INTERRUPTED
    assert "no_such_package_here" in everything.stdout.str()


def test_test_list_directory_form_and_stage_conditions(project, fake_gpus):
    fake_gpus(4, "NVIDIA B200")
    result = project.runpytest("--test-list", "test-lists", "--stage", "B200-4", "-v")
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(
        ["*TestGLM52::test_al PASSED*", "*TestDeepSeekV32::test_al PASSED*"]
    )
    assert "test_other" not in result.stdout.str()


def test_an_entry_matching_nothing_is_an_error_naming_the_closest_ids(project):
    lists = project.path / "test-lists" / "l0_cpu.yml"
    lists.write_text(lists.read_text().replace("test_top.py::test_one", "test_top.py::test_onee"))
    result = project.runpytest("--test-list", "test-lists/l0_cpu.yml", "--stage", "CPU-1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting test-lists/l0_cpu.yml*",
            "test-lists/l0_cpu.yml:13: 'tests/test_top.py::test_onee TIMEOUT (2)' matches no collected test;"
            " closest collected: tests/test_top.py::test_one*",
        ]
    )
    assert " passed" not in result.stdout.str()


def test_entries_outside_the_collection_arguments_are_not_required(project):
    narrowed = project.runpytest(
        "tests/unit", "--test-list", "test-lists/l0_cpu.yml", "--stage", "CPU-1"
    )
    narrowed.assert_outcomes(passed=3)
    by_id = project.runpytest("tests/test_top.py::test_two", "--test-list", "test-lists/l0_cpu.yml")
    by_id.assert_outcomes(deselected=1)


def test_an_entry_in_a_file_that_fails_to_import_reports_only_the_import_error(project):
    (project.path / "tests/test_top.py").write_text("import no_such_module_anywhere\n")
    result = project.runpytest("--test-list", "test-lists/l0_cpu.yml", "--stage", "CPU-1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "no_such_module_anywhere" in result.stdout.str()
    assert "matches no collected test" not in result.stdout.str()


def test_timeout_suffix_is_recorded_and_becomes_a_marker_with_pytest_timeout(project, monkeypatch):
    # Holds with pytest-timeout installed or not (a GPU image has it): without the plugin (absent,
    # or blocked with -p no:timeout) the suffix is only recorded; with it (the real one where
    # installed, else a stand-in registered under its name) it also becomes a marker.
    args = ["--test-list", "test-lists/l0_cpu.yml", "--stage", "CPU-1", "--junit-xml=out.xml"]
    project.makeconftest(
        """
        import os

        def pytest_configure(config):
            if os.environ.get("STAND_IN") and not config.pluginmanager.hasplugin("timeout"):
                config.pluginmanager.register(object(), "timeout")  # stands in for pytest-timeout
                config.addinivalue_line("markers", "timeout(seconds): fake")

        def pytest_collection_finish(session):
            for item in session.items:
                mark = item.get_closest_marker("timeout")
                if mark:
                    print("TIMEOUT", item.nodeid, mark.args)
        """
    )
    without = project.runpytest(*args, "-p", "no:timeout", "-s")
    without.assert_outcomes(passed=4)
    props = ET.parse(project.path / "out.xml").getroot().iter("property")
    assert [(p.get("name"), p.get("value")) for p in props] == [("timeout_minutes", "2")]
    assert "TIMEOUT " not in without.stdout.str()
    monkeypatch.setenv("STAND_IN", "1")
    result = project.runpytest(*args, "-s")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["TIMEOUT tests/test_top.py::test_one (120,)"])


def test_waives_show_in_the_summary_and_in_junit(project):
    result = project.runpytest(
        "--waives", "test-lists/waives.txt", "--junit-xml=out.xml", "-o", "xfail_strict=true"
    )
    assert result.ret == pytest.ExitCode.OK  # a waived XFAIL that passes is reported, not failed
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] tests/unit/test_u.py:*: waived: https://nvbugs/1",
            "XPASS tests/test_top.py::test_two - waived: https://nvbugs/2",
        ]
    )
    cases = {
        c.get("name"): c for c in ET.parse(project.path / "out.xml").getroot().iter("testcase")
    }
    skipped = cases["test_b[2]"].find("skipped")
    assert skipped.get("message") == "waived: https://nvbugs/1"
    waive = cases["test_b[2]"].find("properties/property")
    assert waive.get("name") == "waive" and "waives.txt:2" in waive.get("value")


@pytest.mark.parametrize(
    ("prefix", "waived"),
    [
        (["--test-prefix", "H200-PyTorch-1"], True),
        (["--test-prefix", "DGX_H200-PyTorch-1"], False),  # first '-' part is DGX_H200
        ([], False),  # no stage name: upstream's scoped waives name no test
    ],
)
def test_full_scoped_waives_follow_the_test_prefix_not_the_probed_gpu(
    project, fake_gpus, prefix, waived
):
    fake_gpus(1, "NVIDIA H200")  # the node's GPU is irrelevant: upstream scopes by stage name
    args = ["tests/gpu/test_single.py::test_cuda", "--waives", "test-lists/waives.txt", *prefix]
    result = project.runpytest(*args)
    if waived:
        result.stdout.fnmatch_lines(["*waived: https://nvbugs/3 only on H200"])
    else:
        result.assert_outcomes(passed=1)


def test_a_stage_decides_gpu_scoped_waives_without_probing(project, fake_gpus):
    fake_gpus(1, "NVIDIA B200")  # the node's GPU is irrelevant: the stage says H200
    result = project.runpytest(
        "--test-list",
        "test-lists/l0_gpu.yml",
        "--stage",
        "H200-1",
        "--waives",
        "test-lists/waives.txt",
    )
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*waived: https://nvbugs/3 only on H200"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stage", "CPU-1"], "--stage NAME only means something with --test-list FILE"),
        (["--test-list", "nope.yml"], "--test-list nope.yml: no such file or directory"),
        (
            ["--test-list", "test-lists/l0_cpu.yml", "--stage", "CPU-2"],
            "unknown stage 'CPU-2'; closest: CPU-1",
        ),
        (["--waives", "nope.txt"], "--waives nope.txt: no such file"),
    ],
)
def test_bad_options_are_usage_errors(project, args, message):
    result = project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_a_malformed_list_is_a_usage_error_with_file_and_line(project):
    (project.path / "test-lists" / "l0_cpu.yml").write_text(
        "l0_cpu:\n- condtion: {}\n  tests: [a]\n"
    )
    result = project.runpytest("--test-list", "test-lists/l0_cpu.yml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test-lists/l0_cpu.yml:2: unknown key 'condtion'*"])


def test_the_list_plugin_is_registered_only_when_asked(project):
    plain = project.parseconfigure()
    assert plain.pluginmanager.get_plugin("regress-lists") is None
    assert plain.pluginmanager.get_plugin("regress-devices") is not None
    asked = project.parseconfigure("--waives", "test-lists/waives.txt")
    assert asked.pluginmanager.get_plugin("regress-lists") is not None


def test_report_header_only_with_options(project):
    assert "regress:" not in project.runpytest().stdout.str()
    result = project.runpytest("--test-list", "test-lists/l0_cpu.yml", "--stage", "CPU-1")
    result.stdout.fnmatch_lines(["regress: stage CPU-1 list test-lists/l0_cpu.yml: 2 entries"])


def junit_outcomes(path: Path) -> dict[str, str]:
    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("skipped", "failure", "error")]
        message = case.find("skipped").get("message") if kinds == ["skipped"] else ""
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = f"{kinds} {message}"
    return outcomes


def test_xdist_workers_collect_and_select_identically(project):
    args = ["--test-list", "test-lists/l0_gpu.yml", "--waives", "test-lists/waives.txt"]
    args += ["--stage", "B200-4-Post-Merge"]  # everything under tests/gpu
    serial = project.runpytest_inprocess(*args, "--junit-xml=serial.xml")
    parallel = project.runpytest_inprocess(*args, "-n", "2", "--junit-xml=parallel.xml")
    assert parallel.ret == serial.ret == pytest.ExitCode.OK
    assert "Different tests were collected" not in parallel.stdout.str()
    assert serial.parseoutcomes() == parallel.parseoutcomes() == {"passed": 1, "skipped": 4}
    same = junit_outcomes(project.path / "serial.xml")
    assert junit_outcomes(project.path / "parallel.xml") == same and len(same) == 5


def test_xdist_reports_list_errors_too(project):
    lists = project.path / "test-lists" / "l0_cpu.yml"
    lists.write_text(lists.read_text().replace("test_top.py::test_one", "test_top.py::test_onee"))
    result = project.runpytest_inprocess("--test-list", "test-lists/l0_cpu.yml", "-n", "2")
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*'tests/test_top.py::test_onee TIMEOUT (2)' matches no collected test*"]
    )


PIN_CONFTEST = """
    import os

    # Recorded at conftest import, i.e. before any test (or torch) could touch CUDA.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"seen-{worker}.txt", "w") as handle:
        handle.write(os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
"""


@pytest.mark.parametrize("how", [["--gpu-per-worker"], ["-o", "regress_gpu_per_worker=true"]])
def test_each_xdist_worker_is_pinned_to_one_gpu_before_conftest_runs(project, monkeypatch, how):
    project.makeconftest(PIN_CONFTEST)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    result = project.runpytest_inprocess("tests/unit", "-n", "2", "--dist", "each", *how)
    assert result.ret == pytest.ExitCode.OK
    seen = {p.name: p.read_text() for p in project.path.glob("seen-gw*.txt")}
    assert seen == {"seen-gw0.txt": "3", "seen-gw1.txt": "5"}


def test_without_pinning_every_worker_sees_every_gpu(project, monkeypatch):
    project.makeconftest(PIN_CONFTEST)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    project.runpytest_inprocess("tests/unit", "-n", "2", "--dist", "each")
    seen = {p.name: p.read_text() for p in project.path.glob("seen-gw*.txt")}
    assert seen == {"seen-gw0.txt": "3,5", "seen-gw1.txt": "3,5"}


SENTINEL_TESTS = """
import pytest
from regress.dsa.lifecycle import draft_checkpoints
from regress.dsa.batch import Batch, prepare_batch
from regress.reference.scenarios import make_dsa_metadata

@pytest.mark.parametrize("defects", [(), ("stale_req_idx",)], ids=["clean", "stale"])
def test_loop(dsa_sentinel, defects):
    md = make_dsa_metadata(max_num_requests=8, max_num_tokens=40, max_draft_tokens=4, defects=defects)
    dsa_sentinel.attach(md)
    prepare_batch(md, Batch((5,) * 8))
    for _ in draft_checkpoints(md, 4, [5] * 8):
        pass
"""


def test_dsa_sentinel_fixture_errors_the_test_on_a_violation(project):
    project.makepyfile(test_sentinel_fixture=SENTINEL_TESTS)
    xml = project.path / "out.xml"
    result = project.runpytest("test_sentinel_fixture.py", f"--junit-xml={xml}")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*DSA sentinel: * contract violation(s)*", "*update_for_spec_dec ?eager? layout*"]
    )
    assert "dsa_sentinel" in xml.read_text()


UNRELATED_TEST = """
import pytest

@pytest.mark.gpu
def test_their_own_gpu_marker():
    pass
"""


@pytest.fixture
def unrelated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """Another project, with its own ``gpu`` marker and no regress settings."""
    pytester.makeini("[pytest]\nmarkers =\n    gpu: their own meaning\n")
    pytester.makepyfile(test_theirs=UNRELATED_TEST)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    return pytester


def test_an_unrelated_projects_gpu_marker_is_left_alone(unrelated):
    # The defect: the entry point gated every project's `gpu` marker, so this test was skipped
    # with regress's "gpu: needs 1 CUDA device" reason in a project that never asked for it.
    result = unrelated.runpytest("-rs")
    result.assert_outcomes(passed=1)
    assert "needs 1 CUDA device" not in result.stdout.str()


def test_an_unrelated_project_may_define_the_option_names_tensorrt_llm_uses(unrelated):
    # TensorRT-LLM's tests/integration/defs/conftest.py defines these: registering them too
    # aborted its pytest runs with "conflicting option string".
    unrelated.makeconftest(
        """
        def pytest_addoption(parser):
            parser.addoption("--test-list")
            parser.addoption("--waives-file", "-S")
            parser.addoption("--test-prefix")
        """
    )
    unrelated.runpytest("--test-list", "x.txt").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    "opt_in", [["-p", "regress.pytest_plugin"], ["-o", "regress=true"]], ids=["-p", "ini"]
)
def test_a_project_that_opts_in_gets_the_gate(unrelated, opt_in):
    result = unrelated.runpytest(*opt_in, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*gpu: needs 1 CUDA device, 0 visible*"])


def test_require_gpu_alone_turns_the_gate_on(unrelated):
    result = unrelated.runpytest("--require-gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--require-gpu: no CUDA device is visible*"])


def test_list_options_exist_only_where_the_project_opted_in(unrelated):
    result = unrelated.runpytest("--stage", "X")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unrecognized arguments: --stage" in result.stderr.str()


FILTERED = """
import pytest

@pytest.mark.fast
def test_alpha():
    pass

def test_beta():
    pass

@pytest.mark.fast
def test_gamma():
    pass
"""


def test_k_and_m_entries_select_within_their_path(project):
    project.makepyfile(test_filtered=FILTERED)
    project.makefile(
        ".txt",
        listing='test_filtered.py -k "alpha or beta"\ntest_filtered.py -m "fast" TIMEOUT (3)\n',
    )
    project.makeini(
        "[pytest]\naddopts = -ra --strict-markers\nregress = true\nmarkers =\n    fast: quick\n"
    )
    result = project.runpytest(
        "test_filtered.py", "--test-list", "listing.txt", "-v", "--junit-xml=out.xml"
    )
    result.assert_outcomes(passed=3)
    # alpha is selected by both lines: the first (most specific in list order) gives no timeout;
    # gamma comes only from the -m line and carries its TIMEOUT.
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(project.path / "out.xml").iter("testcase")
    }
    assert props["test_gamma"] == {"timeout_minutes": "3"}
    assert "timeout_minutes" not in props["test_beta"]


def test_a_k_entry_matching_nothing_is_an_error(project):
    project.makepyfile(test_filtered=FILTERED)
    project.makeini(
        "[pytest]\naddopts = -ra --strict-markers\nregress = true\nmarkers =\n    fast: quick\n"
    )
    project.makefile(".txt", listing='test_filtered.py -k "delta"\n')
    result = project.runpytest("test_filtered.py", "--test-list", "listing.txt")
    assert "collected 3 items" in result.stdout.str()  # the file itself collects fine
    result.stdout.fnmatch_lines(
        ["*listing.txt:1: 'test_filtered.py -k \"delta\"' matches no collected test*"]
    )


def test_waive_filters_markers_and_isolation(project):
    project.makepyfile(test_filtered=FILTERED)
    project.makeini(
        "[pytest]\naddopts = -ra --strict-markers\nregress = true\nmarkers =\n    fast: quick\n"
    )
    (project.path / "w.txt").write_text(
        'test_filtered.py -m "fast" SKIP (fast ones)\n'
        "test_filtered.py::test_beta UNSTABLE\n"
        "test_filtered.py::test_gamma ISOLATION\n",
        encoding="utf-8",
    )
    project.makepyfile(
        test_filtered=FILTERED.replace(
            "def test_beta():\n    pass", "def test_beta():\n    assert 0"
        )
    )
    result = project.runpytest("test_filtered.py", "--waives", "w.txt", "-rsx", "--junit-xml=o.xml")
    # gamma's own ISOLATION line is more specific than the file's -m line, so gamma runs.
    result.assert_outcomes(skipped=1, xfailed=1, passed=1)
    result.stdout.fnmatch_lines(["*waived: fast ones*"])
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(project.path / "o.xml").iter("testcase")
    }
    assert props["test_gamma"]["isolation"] == "True"


REGRESS_OPTIONS = ("--trtllm-src", "--test-list", "--stage", "--waives", "--test-prefix")


def listed_options(help_text: str) -> set[str]:
    """The options ``pytest --help`` lists (each starts an indented line), not those named in
    some help text."""
    return set(re.findall(r"^ {2}(--[\w-]+)", help_text, re.MULTILINE))


def test_an_unrelated_project_sees_only_the_installed_switches(unrelated):
    """The docstring's promise: installed, not opted in, the plugin adds --require-gpu and
    --gpu-per-worker and nothing else; --trtllm-src and trtllm_src come with the opt-in."""
    shown = listed_options(unrelated.runpytest("--help").stdout.str())
    assert {"--require-gpu", "--gpu-per-worker"} <= shown
    assert [o for o in REGRESS_OPTIONS if o in shown] == []
    fixtures = unrelated.runpytest("--fixtures").stdout.str()
    assert "trtllm_src" not in fixtures


@pytest.mark.parametrize(
    ("opt_in", "options"),
    [
        (["-p", "regress.pytest_plugin"], REGRESS_OPTIONS),
        (["-o", "regress=true"], REGRESS_OPTIONS),
        (["-p", "regress.check.plugin"], ("--trtllm-src",)),
    ],
    ids=["-p", "ini", "-p upstream"],
)
def test_opting_in_brings_the_upstream_option_and_fixture(unrelated, opt_in, options):
    shown = listed_options(unrelated.runpytest(*opt_in, "--help").stdout.str())
    assert [o for o in options if o not in shown] == []
    assert "trtllm_src" in unrelated.runpytest(*opt_in, "--fixtures").stdout.str()
