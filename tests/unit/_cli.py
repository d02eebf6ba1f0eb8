"""What the CLI tests of bad input share: bad input is one stderr line and exit 2."""

from __future__ import annotations


def one_line_exit_2(result) -> str:
    """The one stderr line of a click result that exited 2 without a traceback."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output and "internal error" not in result.output
    return lines[0]
