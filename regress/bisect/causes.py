"""Why a run could not judge its commit: the vocabulary probes record and diagnoses explain.

A skip says only "no verdict here". The runner and the probes also record, in the outcome's
``details``, *why* (:data:`CAUSE`, a :class:`Cause`) and whether the probe ran at all
(:data:`DID_NOT_RUN`): the store never replays a run in which it did not, and
:mod:`regress.bisect.diagnosis` turns the cause into the likely fix when an endpoint fails.
"""

from __future__ import annotations

import enum

#: ``Outcome.details`` key holding a :class:`Cause` value.
CAUSE = "cause"

#: ``Outcome.details`` key of a run in which the probe did not run at all; its value says why.
DID_NOT_RUN = "did_not_run"

#: git bisect run's "this commit cannot be tested" exit code (``git help bisect``, "bisect run").
SKIP_EXIT_CODE = 125

#: Exit statuses with which a POSIX shell says it could not run the command at all.
SHELL_NOT_RUN = {126: "not executable", 127: "command not found"}


class Cause(enum.StrEnum):
    """Why a run gave no verdict (stored as its value, so results stay plain JSON).

    These are the causes of the runner and of the bisect's own probes; a registered probe may
    record its own (any string) and say how to fix it in its ``fixes``.
    """

    NOT_STARTED = "not-started"
    NOT_FOUND = "not-found"
    NOT_EXECUTABLE = "not-executable"
    TIMEOUT = "timeout"
    BUILD_FAILED = "build-failed"
    ASKED_SKIP = "asked-skip"
    CRASH = "crash"
    NO_METRIC = "no-metric"
    PROBE_FAILED = "probe-failed"
    NO_JUNIT = "no-junit"
    NO_TEST_RESULT = "no-test-result"
