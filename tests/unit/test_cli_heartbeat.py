"""The CLI's heartbeat: a long command says what is still going on instead of going silent.

Issue 31: ``demo --trend`` was silent for its first 7 s and its last 19 s, and ``bisect run``
for a whole probe. No timing is asserted: the heartbeat runs with a tiny interval and the test
waits (with a generous bound) for the line it must print.
"""

from __future__ import annotations

import time

from regress.cli.heartbeat import Heartbeat


def _wait_for(capsys, text: str, bound: float = 30.0) -> str:
    seen = ""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        seen += capsys.readouterr().err
        if text in seen:
            return seen
        time.sleep(0.01)
    return seen


def test_silence_is_filled_with_what_is_still_going_on(capsys):
    with Heartbeat("regress x", every=0.01) as beat:
        beat.say("regress x: probe started on abc", doing="probing abc")
        seen = _wait_for(capsys, "regress x: still probing abc (")
    assert seen.startswith("regress x: probe started on abc\n")
    assert "regress x: still probing abc (" in seen


def test_quiet_has_no_heartbeat_and_exiting_stops_it(capsys):
    with Heartbeat("regress x", every=0.01, quiet=True) as beat:
        beat.say("one line")
        time.sleep(0.1)
    assert capsys.readouterr().err == "one line\n"
    with Heartbeat("regress x", every=0.01) as beat:
        beat.doing("waiting")
    assert not beat._thread.is_alive()
