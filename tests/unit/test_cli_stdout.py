"""An output path that is standard output is ``-``: ``--json /dev/stdout > f`` leaves one JSON
document in ``f``.

Written as a second descriptor (opened with ``O_APPEND``), the JSON landed at the end of ``f``
while the summary, written through fd 1 at offset 0, overwrote its first bytes (issue 31).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from regress.files import STDOUT, is_standard_output


def _regress_to(out_path, *args: str) -> subprocess.CompletedProcess:
    with open(out_path, "w") as out:  # a real `> f` redirect: fd 1 is f, truncated, offset 0
        return subprocess.run(
            [sys.executable, "-c", "from regress.cli import main; main()", *args],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "REGRESS_TRACEBACK": ""},
            check=False,
        )


@pytest.mark.parametrize("alias", ["/dev/stdout", "/proc/self/fd/1", "SAME_FILE"])
def test_defects_json_to_stdout_redirected_to_a_file_is_one_json_document(tmp_path, alias):
    out = tmp_path / "f"
    path = str(out) if alias == "SAME_FILE" else alias
    if alias != "SAME_FILE" and not os.path.exists(alias):
        pytest.skip(f"no {alias} here")
    done = _regress_to(out, "defects", "--json", path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())  # one document and nothing else
    assert {d["name"] for d in doc} >= {"stale_req_idx"}


def test_is_standard_output_compares_the_open_file_not_the_name(tmp_path):
    other = tmp_path / "other"
    other.write_text("")
    assert is_standard_output(STDOUT)
    assert not is_standard_output(None) and not is_standard_output("")
    assert not is_standard_output(other)
    assert not is_standard_output(tmp_path / "missing")
    with open(other, "w") as fh:
        saved = os.dup(1)
        os.dup2(fh.fileno(), 1)
        try:
            assert is_standard_output(other)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
