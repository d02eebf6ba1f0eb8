"""``regress check``'s bad input: one stderr line naming the option or path, exit 2, nothing written.

A tree whose DSA metadata file is there but is not Python text is no verdict (exit 3, the file
named), never "not a tree": a bisect would otherwise read it as a commit from before DSA.
"""

from __future__ import annotations

import pytest
from _upstream_trees import build_tree
from click.testing import CliRunner

from regress.cli import cli


def _check(*args: str):
    return CliRunner().invoke(cli, ["check", *args])


def _one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "0"])
def test_a_timeout_that_is_not_a_usable_number_of_seconds_is_bad_input(tmp_path, value):
    out = tmp_path / "report.json"
    result = _check("--trtllm-src", str(tmp_path), "--timeout", value, "--json", str(out))
    assert result.exit_code == 2
    assert "--timeout" in _one_line(result)
    assert not out.exists()


@pytest.mark.parametrize("value", ["99999999999999999999", "0", "-90", "1000"])
def test_an_sm_no_gpu_has_is_bad_input(tmp_path, value):
    result = _check("--trtllm-src", str(tmp_path), "--sm", value)
    assert result.exit_code == 2
    assert "--sm" in _one_line(result)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda tmp: tmp / "missing", "does not exist"),
        (
            lambda tmp: (tmp / "a-file").write_text("x") and tmp / "a-file",
            "is a file, not a folder",
        ),
        (lambda tmp: "", "path is empty"),
        (lambda tmp: tmp, "is not a TensorRT-LLM tree"),
    ],
    ids=["missing", "file", "empty", "not-a-tree"],
)
def test_a_path_that_is_no_tree_is_one_line_saying_why(tmp_path, make, words):
    out = tmp_path / "report.json"
    result = _check("--trtllm-src", str(make(tmp_path)), "--json", str(out))
    assert result.exit_code == 2
    assert words in _one_line(result)
    assert not out.exists() or "not-a-tree" in out.read_text()


def test_a_binary_metadata_file_is_a_gap_naming_the_file_not_a_tree_before_dsa(tmp_path):
    src = build_tree(tmp_path, "C", "post")
    metadata = next(src.rglob("sparse/dsa/metadata.py"))
    metadata.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 64)
    result = _check("--trtllm-src", str(src))
    assert result.exit_code == 3, result.stderr
    assert f"{metadata} is not Python source" in result.stderr
