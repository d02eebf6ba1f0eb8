"""Plug-ins by name: the one registry type behind ``--probe``, ``--recipe``, ``--engine``, ``--defect``.

Each entry describes itself: its name, a one-line help and the options it reads (their flag and
help), so a command line's choices, option list and help texts are made from the entries and
never written a second time. A registry holds the entries of the package that owns it and finds
every other one through an entry-point group (``regress.probes``, ``regress.recipes``,
``regress.engines``, ``regress.defects``), the way pytest finds its plugins through ``pytest11``:
a third party adds a probe by declaring, in its own ``pyproject.toml``::

    [project.entry-points."regress.probes"]
    my-probe = "my_package.probes:MY_PROBE"

where ``MY_PROBE`` is a :class:`Plugin` (or a sequence of entries). regress's own domain plug-ins
are declared the same way in its ``pyproject.toml``, so the generic packages that own the
registries import none of them. One rule holds for every registry: an option that only another
entry reads is refused, never silently ignored (:meth:`Registry.refuse_foreign`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from regress.errors import RegressError, UsageError


@dataclass(frozen=True)
class Option:
    """One option an entry reads: the key its value is stored under, and how a user gives it.

    The command line is made from these fields (the library never imports click).

    Attributes:
        name: the key of the value (a config field or keyword argument), e.g. ``"threshold"``.
        flag: how the user spells it, e.g. ``"--threshold"``; ``kind="switch"`` takes a pair,
            ``"--higher-is-better/--lower-is-better"``.
        help: one line, without the owner's name (the command line adds it).
        kind: ``"text"``, ``"number"`` (a finite float), ``"flag"`` (on/off, default False) or
            ``"switch"`` (a pair of flags: ``values[0]``, ``values[1]`` or unset).
        default: the value when the option is not given.
        metavar: what the value is called in the help (``"RE"``, ``"FILE"``).
        parse: turns the given text into the value (raising :class:`UsageError`); ``None``: as given.
        values: the values of a switch's first and second flag.
    """

    name: str
    flag: str
    help: str
    kind: str = "text"
    default: Any = None
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None
    values: tuple[Any, Any] = (True, False)

    def __post_init__(self) -> None:
        if self.kind not in ("text", "number", "flag", "switch"):
            raise ValueError(f"option {self.name!r}: unknown kind {self.kind!r}")
        if self.kind == "flag" and self.default is None:
            object.__setattr__(self, "default", False)  # a flag not given is off


class Described(Protocol):
    """What a registry holds: a name, a one-line help and the options the entry reads."""

    @property
    def name(self) -> str: ...

    @property
    def help(self) -> str: ...

    @property
    def options(self) -> tuple[Option, ...]: ...


@dataclass(frozen=True)
class Plugin:
    """An entry that builds something: a probe, a recipe, an engine.

    Attributes:
        name: what the user types after the registry's flag (``--probe NAME``).
        help: one line for the help texts.
        factory: builds the plug-in; what it takes is the registry owner's contract (a
            ``BisectConfig`` for probes and recipes, keyword options for engines).
        options: the options it reads beyond the ones every entry gets.
    """

    name: str
    help: str
    factory: Callable[..., Any]
    options: tuple[Option, ...] = ()


E = TypeVar("E", bound=Described)

#: regress's own project file when it runs from a checkout (beside the package).
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def declared(group: str) -> list[EntryPoint]:
    """The installed entry points of ``group``, and those of regress's own checkout.

    regress run from a checkout (``PYTHONPATH``, no install) has no dist-info, and an editable
    install made before its ``pyproject.toml`` gained a plug-in has a stale one: regress's own
    domain plug-ins are then read from the project file itself, so they never depend on how
    regress was installed. The same entry point found both ways counts once.
    """
    found = _regress_first(entry_points(group=group))
    try:
        project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # installed from a built package: no project file beside it
        return found
    if project.get("project", {}).get("scripts", {}).get("regress") != "regress.cli:main":
        return found  # some other project's file
    own = project["project"].get("entry-points", {}).get(group, {})
    seen = {(p.name, p.value) for p in found}
    found += [EntryPoint(n, v, group) for n, v in own.items() if (n, v) not in seen]
    return _regress_first(found)


def _regress_first(points: Iterable[EntryPoint]) -> list[EntryPoint]:
    """regress's own plug-ins first, then the others by name: one order wherever each was found
    (the order of ``sys.path``, a checkout's project file or an installed package's metadata)."""
    return sorted(points, key=lambda p: (not p.value.startswith("regress."), p.name))


class Registry(Mapping[str, E], Generic[E]):
    """Entries by name: the owner's own, then those of an entry-point group, loaded on first use.

    Args:
        what: what an entry is, for messages (``"probe"``).
        flag: the option that chooses one (``"--probe"``).
        group: the entry-point group other packages declare theirs in (``"regress.probes"``).
        entries: the owner's own entries, first in every listing.
    """

    def __init__(self, what: str, flag: str, group: str, entries: Iterable[E] = ()) -> None:
        self.what, self.flag, self.group = what, flag, group
        self._entries: dict[str, E] = {}
        self._loaded = False
        for entry in entries:
            self.add(entry)

    def add(self, entry: E) -> E:
        """Register ``entry``; a name is taken once (the same entry again is a no-op)."""
        if self._entries.get(entry.name, entry) is not entry:
            raise ValueError(f"the {self.what} {entry.name!r} is registered already")
        self._entries[entry.name] = entry
        return entry

    def load(self) -> None:
        """Add every entry of the group's installed entry points (once).

        Raises:
            RegressError: an installed entry point that does not load or is not an entry.
        """
        if self._loaded:
            return
        self._loaded = True
        for point in declared(self.group):
            try:
                loaded = point.load()
            except Exception as exc:
                raise RegressError(
                    f"the {self.what} plug-in {point.name!r} ({point.value}, entry-point group "
                    f"{self.group}) does not load: {exc}; fix or uninstall the package "
                    "that declares it"
                ) from exc
            many = loaded if isinstance(loaded, list | tuple) else [loaded]
            for entry in many:
                if not all(hasattr(entry, a) for a in ("name", "help", "options")):
                    raise RegressError(
                        f"the {self.what} plug-in {point.name!r} ({point.value}) is not a "
                        "registry entry: point it at a regress.plugins.Plugin"
                    )
                try:
                    self.add(entry)
                except ValueError as exc:
                    raise RegressError(
                        f"{exc}: the plug-in {point.name!r} ({point.value}, entry-point group "
                        f"{self.group}) takes a name in use; rename it"
                    ) from exc

    # Mapping: name -> entry, in registration order, entry points included.
    def __getitem__(self, name: str) -> E:
        self.load()
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def names(self) -> list[str]:
        """Every entry's name, the owner's first, in registration order."""
        return list(self)

    def get_entry(self, name: str) -> E:
        """The entry ``name``; an unknown name is a usage error naming the known ones."""
        if name not in self:
            known = ", ".join(self) or "none registered"
            raise UsageError(
                f"unknown {self.what} {name!r} ({self.flag}): use one of {known} (other "
                f"packages add theirs through the {self.group!r} entry-point group)"
            )
        return self[name]

    def options(self) -> list[tuple[Option, list[str]]]:
        """Every option some entry reads, once, with the names of the entries that read it."""
        seen: dict[str, tuple[Option, list[str]]] = {}
        for entry in self.values():
            for option in entry.options:
                seen.setdefault(option.name, (option, []))[1].append(entry.name)
        return list(seen.values())

    def readers(self, option: str) -> list[str]:
        """The entries that read the option named ``option``."""
        return [e.name for e in self.values() if any(o.name == option for o in e.options)]

    def refuse_foreign(self, chosen: str | None, values: Mapping[str, Any]) -> None:
        """Refuse a value given for an option that only other entries read: it would be ignored.

        Args:
            chosen: the chosen entry's name, or None when none is chosen.
            values: option name -> value; a value equal to the option's default counts as not
                given.
        """
        read = {o.name for o in self[chosen].options} if chosen in self else set()
        for option, others in self.options():
            if option.name in read or option.name not in values:
                continue
            if values[option.name] == option.default:
                continue
            flag = option.flag
            picked = f"{self.flag} {chosen}" if chosen else f"no {self.flag}"
            raise UsageError(
                f"{flag} is read only by {self.flag} {' or '.join(others)}; with {picked} it "
                f"would be ignored: drop it or use {self.flag} {others[0]}"
            )

    def describe(self) -> list[tuple[str, str]]:
        """(name, one-line help) of every entry, for a help text."""
        return [(e.name, e.help) for e in self.values()]
