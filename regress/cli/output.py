"""Command output, the same in every command: the ``--json FILE|-`` option and writing documents.

``--json FILE|-`` writes a command's JSON document to FILE, or to standard output for ``-``; a bare
``--json`` (no value, or followed by another option) means ``-``, which keeps ``regress defects
--json`` working as it did when it was a flag. Paths are checked before the work with
:func:`regress.files.check_output_path`; writing goes through :func:`regress.files.write_output`
(the one writer: a regular file atomically, a device, FIFO or ``/dev/stdout`` in place), and a
write error is bad input (exit 2), never a "regression found".
"""

from __future__ import annotations

import json
import os
from typing import Any

import click

from regress.files import STDOUT, is_standard_output, write_output


class OutputFile(click.ParamType):
    """An output path, ``FILE|-``: a path that is standard output (:func:`is_standard_output`:
    ``/dev/stdout``, ``/proc/self/fd/1``, the file fd 1 is redirected to) becomes ``-``.

    Converted as the command line is parsed, so every ``== STDOUT`` test after it (JSON alone on
    stdout, the summary on stderr) holds for those paths too.
    """

    name = "FILE|-"

    def convert(self, value, param, ctx):
        if value is None:
            return None
        return STDOUT if is_standard_output(value) else str(value)


#: The one instance every ``FILE|-`` option uses.
OUTPUT_FILE = OutputFile()


def json_option(help_text: str = "Write the result as JSON to FILE; '-' (or no value): stdout."):
    """The ``--json [FILE|-]`` option, passed to the command as ``json_out`` (None when absent)."""
    return click.option(
        "--json",
        "json_out",
        is_flag=False,
        flag_value=STDOUT,
        default=None,
        type=OUTPUT_FILE,
        metavar="FILE|-",
        help=help_text,
    )


def emit(target: str | os.PathLike[str] | None, text: str | bytes, *, option: str) -> None:
    """Write ``text`` where an output option says: nowhere (None), stdout (``-``) or a file.

    The one writer of every path option: a file goes through :func:`regress.files.write_output`.
    """
    if target is None:
        return
    if is_standard_output(target):  # also when an option skipped OUTPUT_FILE
        click.echo(text, nl=False)
        return
    write_output(target, text, option=option)


def emit_json(doc: Any, json_out: str | None) -> bool:
    """Write ``doc`` where ``--json`` says; returns True when it went to stdout (print nothing else)."""
    if json_out is None:
        return False
    emit(json_out, json.dumps(doc, indent=2) + "\n", option="--json")
    return json_out == STDOUT
