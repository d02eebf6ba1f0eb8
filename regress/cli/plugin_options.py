"""Click options and help sections made from plug-in registries (:mod:`regress.plugins`).

A registry entry says which options it reads and what each means; this module is the only place
that turns them into click options, so a plug-in a third party installs shows up in ``--help``
and on the command line without an edit to regress.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import click

from regress.cli.options import FiniteFloat
from regress.plugins import Option, Registry

#: Where a registry's generated option values are collected in the command's keyword arguments.
_PREFIX = "plugin__"


def _click_option(option: Option, owners: list[str], what: str) -> Callable:
    owner = " or ".join(owners)
    text = f"{owner} {what}: {option.help}"
    dest = _PREFIX + option.name
    if option.kind == "flag":
        return click.option(option.flag, dest, is_flag=True, default=False, help=text)
    if option.kind == "switch":
        return click.option(option.flag, dest, default=None, help=text)
    kwargs: dict[str, Any] = {"default": None, "metavar": option.metavar, "help": text}
    if option.kind == "number":
        kwargs["type"] = FiniteFloat()
    elif option.default is not None:  # shown as the user would type it
        d = option.default
        shown = ",".join(map(str, d)) if isinstance(d, tuple | list) else str(d)
        kwargs.update(default=shown, show_default=True)
    return click.option(option.flag, dest, **kwargs)


def registry_options(registry: Registry, *, skip: tuple[str, ...] = ()) -> Callable:
    """A decorator adding a click option for every option an entry of ``registry`` reads.

    Args:
        skip: option names the command declares itself (they are not added twice).
    """
    made = [
        _click_option(option, owners, registry.what)
        for option, owners in registry.options()
        if option.name not in skip
    ]

    def decorate(f):
        for add in reversed(made):  # click lists options in decorator order, top first
            f = add(f)
        return f

    return decorate


def take_values(registry: Registry, opts: dict[str, Any]) -> dict[str, Any]:
    """The values of ``registry``'s generated options, popped from ``opts``, by option name.

    A value not given is left out; a text is parsed as its option says; a switch gives its
    option's ``values``.
    """
    out: dict[str, Any] = {}
    for option, _ in registry.options():
        value = opts.pop(_PREFIX + option.name, None)
        if value is None or (option.kind == "flag" and not value):
            continue
        if option.kind == "switch":
            value = option.values[0] if value else option.values[1]
        elif option.parse is not None and isinstance(value, str):
            value = option.parse(value)
        out[option.name] = value
    return out


def choices_help(registry: Registry, heading: str, width: int = 78) -> str:
    """A help section listing each entry and its one-line help (click's ``\\b`` keeps the lines)."""
    lines = [f"{heading} ({registry.flag}):"]
    pad = max((len(name) for name in registry), default=0) + 4
    for name, text in registry.describe():
        wrapped = textwrap.wrap(text, width - pad) or [""]
        lines.append(f"  {name.ljust(pad - 2)}{wrapped[0]}")
        lines.extend(" " * pad + more for more in wrapped[1:])
    return "\b\n" + "\n".join(lines)


def inline_help(registry: Registry) -> str:
    """``name: help; name: help`` for an option's own help text."""
    return "; ".join(f"{name}: {text}" for name, text in registry.describe()) + "."
