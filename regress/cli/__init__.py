"""The ``regress`` command: a click group that loads each subcommand's module only when it runs.

Subcommands live one per module in this package (``regress/cli/<name>.py``, exposing a click
command or group under the same name). Loading lazily keeps ``regress --help`` instant and free of
torch; a subcommand whose module is absent is simply not listed.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
import re
import sys
import traceback

import click

from regress import __version__
from regress.errors import (
    BAD_INPUT,
    FAILED,
    MissingDependencyError,
    RegressError,
    Terminated,
    exit_codes_overview,
    interrupt_exit_code,
    save_traceback,
)
from regress.processes import sigterm_raises

# name -> (module, attribute, one-line help shown by `regress --help`)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": (
        "regress.cli.demo",
        "demo",
        "Plant two regressions in a throwaway repo and bisect them.",
    ),
    "accept": (
        "regress.cli.accept",
        "accept",
        "Profile MTP acceptance per batch size and judge it.",
    ),
    "bisect": (
        "regress.cli.bisect",
        "bisect",
        "Find the commit that caused (or fixed) a regression.",
    ),
    "defects": (
        "regress.cli.defects",
        "defects",
        "List the historical defects the reference engine replays.",
    ),
    "testlist": ("regress.cli.testlist", "testlist", "Show and validate CI stage test lists."),
    "junit": ("regress.cli.junit", "junit", "Merge and summarise JUnit XML from CI stages."),
    "bot": ("regress.cli.bot", "bot", "Parse and plan /bot PR comments."),
    "check": (
        "regress.cli.check",
        "check",
        "Check the DSA contracts on a TensorRT-LLM source tree, on a CPU.",
    ),
    "trend": (
        "regress.cli.trend",
        "trend",
        "Nightly acceptance history: change points and the bisect they start.",
    ),
}


# Subcommands that need an optional extra: command -> (module to check, extra that provides it).
# torch is an extra so the CI plumbing installs on a small runner without a multi-GB download.
_NEEDS: dict[str, tuple[str, str]] = {
    "demo": ("torch", "torch"),
    "accept": ("torch", "torch"),
    "defects": ("torch", "torch"),
    "check": ("torch", "torch"),
}


def _check_extra(name: str) -> None:
    """Refuse a subcommand whose extra is missing, naming the extra (exit 3, as errors.py says)."""
    if name not in _NEEDS:
        return
    module, extra = _NEEDS[name]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        from regress.install import install_hint

        raise MissingDependencyError(
            f"regress {name} needs {module}, which is not installed; install it with: "
            f"{install_hint(extra)}"
        )


def _available(name: str) -> bool:
    module = _COMMANDS[name][0]
    return importlib.util.find_spec(module) is not None


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n in _COMMANDS if _available(n))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS or not _available(cmd_name):
            return None
        module_name, attr, _ = _COMMANDS[cmd_name]
        return getattr(importlib.import_module(module_name), attr)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        # The extra is checked when the command is to run, not for its --help: the modules
        # import torch only inside the functions that use it, so help needs none.
        name, cmd, rest = super().resolve_command(ctx, args)
        words = rest[: rest.index("--")] if "--" in rest else rest
        if name is not None and not set(words) & set(ctx.help_option_names):
            _check_extra(name)
        return name, cmd, rest

    def make_context(self, info_name, args, parent=None, **extra) -> click.Context:
        # `regress --bogus` fails here, before invoke: the same one line as a subcommand's.
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context):
        # The one place an exception becomes a message and an exit code, for the console script
        # and for CliRunner alike: a RegressError says its own message and code, a click usage
        # error is one line (exit 2), Ctrl-C is 130 and SIGTERM 143 (both unwind, so cleanups
        # run), a write to a full or closed stdout is exit 2, and anything unexpected is one
        # line plus the path of its saved traceback.
        try:
            with sigterm_raises():
                return super().invoke(ctx)
        except RegressError as exc:
            click.echo(f"regress: error: {_flat(str(exc))}", err=True)
            ctx.exit(exc.exit_code)
        except (KeyboardInterrupt, click.Abort) as exc:
            said = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            click.echo(f"regress: {said}", err=True)
            ctx.exit(interrupt_exit_code(exc))
        except click.UsageError as exc:
            raise _one_line(exc) from None
        except (click.exceptions.Exit, click.ClickException):
            raise
        except OSError as exc:
            if not _stdout_failed(exc):
                _internal_error(ctx, exc)
            if exc.errno != errno.EPIPE:  # a reader that stopped reading (| head) wants no line
                click.echo(
                    f"regress: error: cannot write to standard output ({exc.strerror}); "
                    "free space on its device or redirect it elsewhere",
                    err=True,
                )
            ctx.exit(BAD_INPUT)
        except Exception as exc:
            _internal_error(ctx, exc)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Use the static help lines so --help imports no subcommand module.
        rows = [(n, _COMMANDS[n][2]) for n in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=exit_codes_overview(),
)
@click.version_option(__version__, prog_name="regress")
def cli() -> None:
    """Regression suite and bisect toolkit for speculative decoding on DSA models."""


class _OneLineUsageError(click.UsageError):
    """A click usage error shown as one line (click's own is Usage, Try and Error: three)."""

    def show(self, file=None) -> None:
        names, ctx = [], self.ctx
        while ctx is not None:
            names.append(ctx.info_name or "")
            ctx = ctx.parent
        sub = " ".join(reversed(names[:-1]))  # the root is `regress`, however it was invoked
        where = f"regress {sub}".rstrip()
        message = _flat(self.format_message()).rstrip(".")
        click.echo(
            f"regress: error: {f'{sub}: ' if sub else ''}{message} (see `{where} --help`)",
            err=True,
        )


def _one_line(exc: click.UsageError) -> click.UsageError:
    # NoArgsIsHelpError (a bare `regress bisect`) shows the help, which is what the user wants.
    if isinstance(exc, click.exceptions.NoArgsIsHelpError | _OneLineUsageError):
        return exc
    return _OneLineUsageError(exc.format_message(), ctx=exc.ctx)


def _flat(message: str) -> str:
    """One line: a message that spans lines (a parser's own) joined at its line breaks."""
    return re.sub(r"\s*\n\s*", "; ", message.strip())


def _stdout_failed(exc: OSError) -> bool:
    """Whether ``exc`` came from writing standard output (``click.echo`` to a full or closed
    stdout: the error names no file, and its traceback passes through ``click.echo``).

    Standard output then gets ``/dev/null`` underneath, so the interpreter's own flush at exit
    does not print a second error.
    """
    if exc.filename is not None:
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    if not any(f.name == "echo" and f.filename == click.utils.__file__ for f in frames):
        return False
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return True  # CliRunner's stdout: nothing underneath to silence
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)
    return True


def _internal_error(ctx: click.Context, exc: Exception) -> None:
    if os.environ.get("REGRESS_TRACEBACK"):
        raise exc
    saved = save_traceback(exc)
    click.echo(
        f"regress: internal error: {type(exc).__name__}: {exc} "
        f"(traceback saved to {saved}; please attach it to a bug report)",
        err=True,
    )
    ctx.exit(FAILED)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="regress")
