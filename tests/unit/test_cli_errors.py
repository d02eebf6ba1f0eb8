"""The CLI's one exception boundary: RegressError codes, Ctrl-C 130, no traceback for a user."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from regress import cli as cli_module
from regress.errors import UsageError


def _with_command(monkeypatch, body):
    @click.command("boom")
    def boom():
        body()

    monkeypatch.setitem(cli_module._COMMANDS, "boom", ("regress.cli", "_boom", "test"))
    monkeypatch.setattr(cli_module, "_boom", boom, raising=False)
    return CliRunner().invoke(cli_module.cli, ["boom"])


def test_a_regress_error_exits_with_its_own_code(monkeypatch):
    def body():
        raise UsageError("bad thing; do this instead")

    result = _with_command(monkeypatch, body)
    assert result.exit_code == 2
    assert "regress: error: bad thing; do this instead" in result.output


def test_ctrl_c_exits_130(monkeypatch):
    def body():
        raise KeyboardInterrupt

    result = _with_command(monkeypatch, body)
    assert result.exit_code == 130
    assert "interrupted" in result.output


def test_an_unexpected_error_is_one_line_and_a_saved_traceback(monkeypatch, tmp_path):
    monkeypatch.delenv("REGRESS_TRACEBACK", raising=False)
    monkeypatch.setenv("REGRESS_TRACEBACK_DIR", str(tmp_path))

    def body():
        raise ZeroDivisionError("oops")

    result = _with_command(monkeypatch, body)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    (saved,) = tmp_path.iterdir()
    assert "ZeroDivisionError: oops" in saved.read_text()
    assert str(saved) in result.output


def test_regress_traceback_reraises_for_developers(monkeypatch):
    monkeypatch.setenv("REGRESS_TRACEBACK", "1")

    def body():
        raise ZeroDivisionError("oops")

    result = _with_command(monkeypatch, body)
    assert isinstance(result.exception, ZeroDivisionError)


@pytest.mark.parametrize("code", [0, 3])
def test_click_exits_pass_through(monkeypatch, code):
    def body():
        raise click.exceptions.Exit(code)

    assert _with_command(monkeypatch, body).exit_code == code
