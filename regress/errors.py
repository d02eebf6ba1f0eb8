"""The one exception family of regress and the one exit-code table; the CLI turns each error into
a message and an exit code.

:data:`EXIT_CODES` says what each code means to each command. The CLI's help texts are made from
it and the README's "Exit codes" table quotes it (``tests/unit/test_errors.py`` compares the two).
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path

#: Success: no regression, culprit found, contracts hold.
OK = 0
#: What the command looks for was found (a regression, a broken contract), or an error.
FAILED = 1
#: Bad input (:class:`UsageError`): the user can fix the command line or the files it names.
BAD_INPUT = 2
#: The work could not finish (:class:`EngineError`): the engine failed, a bisect was
#: inconclusive, the sandbox cannot load a tree.
UNFINISHED = 3
#: Exit code of an interrupted command (128 + SIGINT), as shells report it.
INTERRUPTED = 130
#: Exit code of a command stopped by SIGTERM (128 + 15): a cancelled CI job, ``scancel``,
#: ``timeout``. It cleans up as Ctrl-C does (:class:`Terminated`).
TERMINATED = 143

#: What each exit code means to each command (the README's "Exit codes" table).
EXIT_CODES: dict[str, dict[int, str]] = {
    "regress accept": {
        OK: "no regression",
        FAILED: "regression found",
        BAD_INPUT: "bad input",
        UNFINISHED: "engine error (torch or tensorrt_llm missing included)",
        INTERRUPTED: "interrupted (Ctrl-C)",
        TERMINATED: "terminated (SIGTERM)",
    },
    "regress bisect": {  # in the order its help states them: outcomes first
        OK: "culprit found",
        UNFINISHED: "inconclusive",
        BAD_INPUT: "bad input",
        FAILED: "error",
        INTERRUPTED: "interrupted (rerun to resume)",
        TERMINATED: "terminated (SIGTERM; rerun to resume)",
    },
    "regress demo": {
        OK: "both culprits match (--check: both trees judged as expected)",
        FAILED: "a culprit missed (--check: a tree not judged as expected)",
        BAD_INPUT: "bad input",
        UNFINISHED: "torch is not installed",
        INTERRUPTED: "interrupted (throwaway repository removed)",
        TERMINATED: "terminated (SIGTERM; throwaway repository removed)",
    },
    "regress check": {
        OK: "contracts hold (findings a --known file lists aside)",
        FAILED: "a contract is broken",
        BAD_INPUT: "not a TensorRT-LLM tree",
        UNFINISHED: "no verdict (the tree cannot be loaded, exits, hangs or needs what the sandbox "
        "fakes) or torch is not installed",
        INTERRUPTED: "interrupted",
        TERMINATED: "terminated (SIGTERM)",
    },
    "regress trend check": {
        OK: "no open regression",
        FAILED: "open regression",
        BAD_INPUT: "bad input",
        INTERRUPTED: "interrupted",
        TERMINATED: "terminated (SIGTERM)",
    },
    "other commands": {
        OK: "success",
        FAILED: "failure (a contract violation, or new failures under `junit summary --fail-on-new`)",
        BAD_INPUT: "bad input (a rejected `/bot` comment or an invalid test list)",
        UNFINISHED: "a needed module is not installed (torch for `defects`, matplotlib for "
        "`trend plot`)",
        INTERRUPTED: "interrupted",
        TERMINATED: "terminated (SIGTERM)",
    },
}


#: Widest line of the top-level help's exit table (issue 31: rows were 218 characters).
HELP_WIDTH = 96


def _codes(codes: dict[int, str]) -> str:
    """``0 success; 1 failure; ...``: codes apart by ``;`` (a meaning may hold commas)."""
    return "; ".join(f"{c} {meaning}" for c, meaning in codes.items())


def exit_codes_help(command: str) -> str:
    """One paragraph for ``command``'s ``--help``: ``Exit codes: 0 no regression; 1 ...``."""
    return f"Exit codes: {_codes(EXIT_CODES[command])}."


def exit_codes_overview() -> str:
    """The top-level ``--help`` epilog: every command's codes, wrapped under its name to
    :data:`HELP_WIDTH` (click keeps lines after ``\\b`` as they are)."""
    import textwrap

    names = {name: name.removeprefix("regress ") for name in EXIT_CODES}
    width = max(len(short) for short in names.values())
    rows = []
    for name, codes in EXIT_CODES.items():
        head = f"  {names[name]:{width}s}  "
        rows += textwrap.wrap(
            _codes(codes),
            HELP_WIDTH,
            initial_indent=head,
            subsequent_indent=" " * len(head),
            break_on_hyphens=False,
        )
    return "\b\nExit codes (README.md has the table):\n" + "\n".join(rows)


def exit_codes_markdown() -> str:
    """The README's table: a row per code, a column per command."""
    codes = sorted({c for meanings in EXIT_CODES.values() for c in meanings})
    heads = [f"`{name}`" if name.startswith("regress") else name for name in EXIT_CODES]

    def row(cells: list[str]) -> str:
        return "|" + "".join(f" {c} |" if c else " |" for c in cells)

    lines = [row(["code", *heads]), row(["---"] * (len(heads) + 1))]
    for code in codes:
        lines.append(row([str(code), *(EXIT_CODES[name].get(code, "") for name in EXIT_CODES)]))
    return "\n".join(lines)


class RegressError(Exception):
    """Base of every error regress raises on purpose.

    Messages say what went wrong and what to do next; ``exit_code`` is what the CLI exits with.
    """

    exit_code: int = FAILED

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(RegressError):
    """Bad input: an unknown option value, a missing file, an impossible range."""

    exit_code = BAD_INPUT


class EngineError(RegressError):
    """The inference engine could not run (missing dependency, crash, bad checkpoint)."""

    exit_code = UNFINISHED


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread (:func:`regress.processes.sigterm_raises`).

    A ``KeyboardInterrupt`` so that every cleanup written for Ctrl-C (killing probe groups,
    removing temp folders, recording a bisect as interrupted) runs for it too; the CLI exits
    :data:`TERMINATED` instead of :data:`INTERRUPTED`.
    """


def interrupt_exit_code(exc: BaseException) -> int:
    """143 for SIGTERM, 130 for Ctrl-C."""
    return TERMINATED if isinstance(exc, Terminated) else INTERRUPTED


class MissingDependencyError(EngineError):
    """An optional dependency (``tensorrt_llm``, ``matplotlib``, CUDA) is not available."""


def require_module(name: str, *, purpose: str, install: str) -> object:
    """Import an optional module lazily, or explain how to get it.

    Args:
        name: module to import, e.g. ``"tensorrt_llm"``.
        purpose: what the caller wanted it for, for the error message.
        install: the command that installs it.

    Raises:
        MissingDependencyError: naming the module, the purpose and the install command.
    """
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:  # pragma: no branch - message only
        raise MissingDependencyError(
            f"{purpose} needs the Python module '{name}', which is not importable ({exc}). "
            f"Install it with: {install}"
        ) from exc


def save_traceback(exc: BaseException) -> Path:
    """Write ``exc``'s traceback to a file and return its path.

    Users see one line naming this file instead of a traceback; ``REGRESS_TRACEBACK=1`` makes the
    CLI re-raise instead. The folder is ``$REGRESS_TRACEBACK_DIR``, else the system temp folder.
    """
    folder = Path(os.environ.get("REGRESS_TRACEBACK_DIR") or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    fd, name = tempfile.mkstemp(prefix=f"regress-traceback-{stamp}-", suffix=".txt", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("".join(traceback.format_exception(exc)))
    return Path(name)
