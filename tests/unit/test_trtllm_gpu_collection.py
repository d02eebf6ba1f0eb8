"""The GPU tests of the TensorRT-LLM cases are collected with the right ids and skip with reasons.

They cannot run here (no ``tensorrt_llm``, no GPU); what can be checked is that ``pytest -m gpu``
on a CI box would collect every axis of issue 21 under the ids the docs name, and that on a
machine without the package or the GPUs each one skips and says why (never passes, never errors).
"""

from __future__ import annotations

import functools
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = (
    "tests/integration/test_dsa_mtp_acceptance.py",
    "tests/integration/test_layerwise_shapes.py",
)


@functools.cache
def pytest_run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", *FILES, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return proc.stdout + proc.stderr


def collected() -> list[str]:
    return [line for line in pytest_run("--collect-only", "-q").splitlines() if "::" in line]


def ids_of(test: str) -> list[str]:
    return [re.search(r"\[(.*)\]$", n).group(1) for n in collected() if f"::{test}[" in n]


def test_the_kv_manager_axis_is_collected_for_both_models():
    expected = [f"b{b}-k{k}-graph-kv{kv}" for kv in ("v2", "v1") for k in (1, 3) for b in (1, 8)]
    assert ids_of("TestDeepSeekV32::test_kv_cache_manager") == expected
    assert ids_of("TestGLM52::test_kv_cache_manager") == expected


def test_the_index_share_axis_is_collected_for_glm_only():
    ids = ids_of("TestGLM52::test_index_share")
    assert len(ids) == 12 and "b8-k3-graph-share" in ids and "b8-k3-graph-noshare" in ids
    assert ids_of("TestDeepSeekV32::test_index_share") == []


def test_the_pool_fill_and_upstream_configs_are_collected():
    assert ids_of("TestGLM52::test_indexer_pool_fill") == [
        "b32-k1-graph-kvv2-pool",
        "b32-k3-graph-kvv2-pool",
    ]
    assert ids_of("TestDeepSeekV32::test_upstream_config") == [
        "baseline_mtp1",
        "heuristic_topk_mtp1",
    ]
    assert ids_of("TestGLM52::test_upstream_config") == ["mtp_index_share"]
    assert len(ids_of("TestGLM52::test_acceptance")) == 18


def test_the_sm90_and_sm100_buffer_sets_are_collected():
    ids = ids_of("test_width_contract_holds_on_the_buffer_set_this_arch_reads")
    assert sorted(ids) == sorted(f"{a}-k{k}" for a in ("sm90", "sm100") for k in (1, 2, 3, 4))


@pytest.mark.skipif(
    importlib.util.find_spec("tensorrt_llm") is not None,
    reason="tensorrt_llm is installed here: these tests would run, not skip",
)
def test_every_one_skips_here_with_its_reasons():
    out = pytest_run("-q", "-rs")
    # the last summary line, not the last line: other plugins (pytest-benchmark) warn after it
    summaries = [ln.strip() for ln in out.splitlines() if re.search(r" in [\d.]+s\b", ln)]
    assert summaries, out[-2000:]
    assert re.fullmatch(r"=* ?\d+ skipped in [\d.]+s ?=*", summaries[-1]), summaries[-1]
    reasons = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert reasons and all("tensorrt_llm" in r for r in reasons), reasons[:3]
    assert sum(int(re.search(r"SKIPPED \[(\d+)\]", r).group(1)) for r in reasons) == len(
        collected()
    )
