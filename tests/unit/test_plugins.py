"""The plug-in registry: entries that describe themselves, found through entry points.

A third party is simulated as pytest's own plugin tests do: a package and its ``*.dist-info``
(``METADATA`` and ``entry_points.txt``) written to a temporary folder put on the path, so
``importlib.metadata`` finds it exactly as it finds an installed wheel; regress is not edited.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from regress.errors import RegressError, UsageError
from regress.plugins import Option, Plugin, Registry

ROOT = Path(__file__).resolve().parents[2]


def _install(site: Path, name: str, module: str, source: str, points: dict[str, dict]) -> Path:
    """Write ``module`` and a dist-info declaring ``points`` ({group: {name: "mod:OBJ"}})."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = []
    for group, entries in points.items():
        lines.append(f"[{group}]")
        lines.extend(f"{k} = {v}" for k, v in entries.items())
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return site


def _entry(name: str, *options: Option) -> Plugin:
    return Plugin(name, f"the {name} entry", lambda **kw: (name, kw), options)


# --- the registry itself -------------------------------------------------------------------------


def test_a_name_is_taken_once_and_unknown_names_list_the_known_ones():
    reg = Registry("probe", "--probe", "regress.test-none", [_entry("a")])
    same = reg["a"]
    reg.add(same)  # the same entry again is a no-op
    with pytest.raises(ValueError, match="registered already"):
        reg.add(_entry("a"))
    with pytest.raises(UsageError, match=r"unknown probe 'b' \(--probe\): use one of a"):
        reg.get_entry("b")


def test_an_option_only_another_entry_reads_is_refused_never_ignored():
    needle = Option("needle", "--needle", "word that marks a bad run.")
    loud = Option("loud", "--loud", "shout.", kind="flag")
    reg = Registry(
        "probe", "--probe", "regress.test-none", [_entry("a", needle), _entry("b", loud)]
    )
    reg.refuse_foreign("a", {"needle": "x", "loud": False})  # a default is "not given"
    reg.refuse_foreign("b", {"loud": True})
    with pytest.raises(UsageError) as caught:
        reg.refuse_foreign("b", {"needle": "x"})
    assert str(caught.value) == (
        "--needle is read only by --probe a; with --probe b it would be ignored: drop it or use "
        "--probe a"
    )
    with pytest.raises(UsageError, match="with no --probe it would be ignored"):
        reg.refuse_foreign(None, {"loud": True})


def test_entries_come_from_an_installed_entry_point_group(tmp_path, monkeypatch):
    site = _install(
        tmp_path,
        "thirdparty",
        "thirdparty_entries",
        """
        from regress.plugins import Plugin
        ONE = Plugin("one", "the first", dict)
        MANY = (Plugin("two", "the second", dict), Plugin("three", "the third", dict))
        """,
        {
            "regress.test-group": {
                "one": "thirdparty_entries:ONE",
                "many": "thirdparty_entries:MANY",
            }
        },
    )
    monkeypatch.syspath_prepend(str(site))
    reg = Registry("thing", "--thing", "regress.test-group", [_entry("own")])
    assert reg.names()[0] == "own"  # the owner's entries first
    assert sorted(reg.names()[1:]) == ["one", "three", "two"]
    assert reg["two"].help == "the second"


def test_a_plugin_that_does_not_load_or_takes_a_used_name_is_named(tmp_path, monkeypatch):
    site = _install(
        tmp_path,
        "broken",
        "broken_entries",
        "from regress.plugins import Plugin\nOWN = Plugin('own', 'again', dict)\nNOT = 42\n",
        {
            "regress.test-broken": {"gone": "broken_entries:MISSING"},
            "regress.test-not-entry": {"num": "broken_entries:NOT"},
            "regress.test-clash": {"own": "broken_entries:OWN"},
        },
    )
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(RegressError, match=r"plug-in 'gone' .* does not load"):
        Registry("thing", "--thing", "regress.test-broken").names()
    with pytest.raises(RegressError, match="is not a registry entry"):
        Registry("thing", "--thing", "regress.test-not-entry").names()
    with pytest.raises(RegressError, match="takes a name in use"):
        Registry("thing", "--thing", "regress.test-clash", [_entry("own")]).names()


# --- regress's own registries --------------------------------------------------------------------


def test_regress_declares_its_domain_plugins_as_a_third_party_would():
    """The generic packages import none of them: pyproject.toml's entry points bring them in."""
    from regress.acceptance.engines import ENGINES
    from regress.bisect.registry import PROBES, RECIPES
    from regress.reference.defects import DEFECTS

    assert PROBES.names() == ["exit-code", "metric", "pytest", "assert"]
    assert RECIPES.names() == ["trtllm", "trtllm-precompiled", "trtllm-source"]
    assert ENGINES.names() == ["reference", "trtllm"]
    assert "stale_req_idx" in DEFECTS and DEFECTS["stale_req_idx"].help
    assert PROBES.readers("signature") == ["assert"]
    assert RECIPES.readers("wheel") == ["trtllm-precompiled"]


def test_regress_run_from_a_checkout_still_finds_its_own_plugins(monkeypatch):
    """No dist-info (PYTHONPATH, or a stale editable install): pyproject.toml is read instead."""
    from regress import plugins

    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    assert Registry("probe", "--probe", "regress.probes").names() == ["assert"]
    assert Registry("engine", "--engine", "regress.engines").names() == ["trtllm"]


def test_a_plugin_option_no_entry_reads_is_refused():
    from regress.bisect.config import BisectConfig

    with pytest.raises(UsageError, match="no registered probe or recipe reads the option"):
        BisectConfig(good="A", bad="B", command=["x"], options={"needle": "x"})
    config = BisectConfig(
        good="A", bad="B", command=["x"], probe="assert", options={"signature": "Q"}
    )
    from regress.bisect.registry import make_probe

    assert make_probe("assert", config).config() == {"kind": "assert", "signature": "Q"}


def test_bisect_holds_no_domain_words():
    """bisect/ is generic by vocabulary too: the domain lives in the plug-ins' own entries."""
    words = ("deepgemm", "dsa", "trtllm", "tensorrt", "mtp", "acceptance", "wheel", "signature")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {word}"
        for path in [
            *sorted((ROOT / "regress" / "bisect").rglob("*.py")),
            ROOT / "regress/plugins.py",
        ]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for word in words
        if word in line.lower()
    ]
    assert found == []


# --- a third party's plug-ins on the command line, regress unedited ------------------------------

THIRD_PARTY = """
import re
from regress.bisect.probes import Finished, not_run
from regress.bisect.verdicts import Outcome, Verdict
from regress.plugins import Option, Plugin
from regress.reference.defects import Defect


class NeedleProbe:
    kind = "needle"

    def __init__(self, needle):
        self.needle = needle

    def argv(self, command, scratch):
        return list(command)

    def classify(self, run: Finished) -> Outcome:
        early = not_run(run)
        if early:
            return early
        bad = self.needle in run.stdout
        return Outcome(Verdict.BAD if bad else Verdict.GOOD, "needle" if bad else "clean")

    def config(self):
        return {"kind": self.kind, "needle": self.needle}


NEEDLE = Plugin(
    "needle",
    "bad iff the output shows the --needle word",
    lambda config: NeedleProbe(config.options["needle"]),
    (Option("needle", "--needle", "the word that marks a bad run.", metavar="WORD"),),
)
ECHO = Plugin("echo", "an engine that only echoes", dict)
LATE = Defect("late_thing", "a thing arrives late.", "nowhere", "lateness")
"""


@pytest.fixture
def third_party(tmp_path):
    site = _install(
        tmp_path / "site",
        "regress-needle",
        "regress_needle",
        THIRD_PARTY,
        {
            "regress.probes": {"needle": "regress_needle:NEEDLE"},
            "regress.engines": {"echo": "regress_needle:ECHO"},
            "regress.defects": {"late": "regress_needle:LATE"},
        },
    )
    env = {
        **os.environ,
        "COLUMNS": "100",  # click wraps help to the terminal: the choices must stay on one line
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
    }
    return env


def _regress(env, *args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "regress", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_offers_a_third_party_probe_engine_and_defect(third_party):
    shown = _regress(third_party, "bisect", "run", "--help")
    assert shown.returncode == 0, shown.stderr
    assert "[exit-code|metric|pytest|assert|needle]" in shown.stdout
    assert "needle     bad iff the output shows the --needle word" in shown.stdout
    assert "--needle WORD" in shown.stdout and "needle probe: the word that marks" in shown.stdout
    accept = " ".join(_regress(third_party, "accept", "--help").stdout.split())
    assert "[reference|trtllm|echo]" in accept and "echo: an engine that only echoes" in accept
    listed = _regress(third_party, "defects")
    assert "late_thing\n  a thing arrives late." in listed.stdout


def test_a_third_party_probe_bisects_with_its_own_option(third_party, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    for i in range(6):
        (repo / "out.txt").write_text(f"hay {i}\n" + ("needle\n" if i >= 3 else ""))
        git("add", "out.txt")
        git("commit", "-qm", f"c{i}")
    probe = ["--probe", "needle", "--needle", "needle", "--cache-dir", str(tmp_path / "c")]
    done = _regress(
        third_party,
        "bisect",
        "run",
        "--good",
        "HEAD~5",
        "--bad",
        "HEAD",
        *probe,
        "-q",
        "--json",
        "-",
        "--",
        "cat",
        "out.txt",
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    assert '"subject": "c3"' in done.stdout
    refused = _regress(
        third_party, "bisect", "run", "--good", "HEAD~5", "--needle", "x", "--", "true", cwd=repo
    )
    assert refused.returncode == 2
    assert "--needle is read only by --probe needle; with --probe exit-code" in refused.stderr


def test_a_version_1_session_keeps_its_plugin_options():
    """Sessions stored before the options moved (``signature`` beside the fields) still load."""
    from regress.bisect.session import config_from_session

    old = {"good": "A", "bad": "B", "command": ["x"], "probe": "assert", "signature": "Q"}
    config = config_from_session({"schema": 1, "config": {**old, "wheel": None}})
    assert config.options == {"signature": "Q"}
    again = config_from_session({"schema": 2, "config": {**old, "options": {}}})
    assert again.options == {"signature": "Q"}


def test_regress_own_plug_ins_come_first_whatever_sys_path_finds_first(monkeypatch):
    """A plug-in on PYTHONPATH is found before site-packages; the listing must not depend on it
    (an installed regress has no project file to add its own entries in order)."""
    from importlib.metadata import EntryPoint

    from regress import plugins

    theirs = EntryPoint("aaa", "zzz_plugin:AAA", "regress.probes")
    ours = EntryPoint("assert", "regress.trtllm.probes:ASSERT", "regress.probes")
    monkeypatch.setattr(plugins, "entry_points", lambda group: [theirs, ours])
    monkeypatch.setattr(plugins, "PYPROJECT", plugins.PYPROJECT.with_name("absent.toml"))
    assert [p.name for p in plugins.declared("regress.probes")] == ["assert", "aaa"]
