"""The DeepGEMM-assert bisect probe (``--probe assert``): a run that aborts on bug 2's assertion.

Bug 2 (an unannounced MTP shape) kills the process on DeepGEMM's host assertion in
``fp8_paged_mqa_logits``. :class:`AssertProbe` calls a run bad when its output shows a signature
(a regex), whose default here is that assertion. :data:`ASSERT` is its registry entry, declared in
regress's ``pyproject.toml`` under the ``regress.probes`` entry-point group, so the bisect finds
it without importing this module by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.bisect.causes import CAUSE
from regress.bisect.probes import Finished, not_run
from regress.bisect.verdicts import Outcome, Verdict
from regress.dsa.announce import DEEPGEMM_ASSERT
from regress.errors import UsageError
from regress.plugins import Option, Plugin

#: DeepGEMM's host assertion (``csrc/apis/attention.hpp``, any condition) or any Python assertion.
DEEPGEMM_SIGNATURE = re.escape(DEEPGEMM_ASSERT.partition("(")[0]) + r"\(.*\)|AssertionError"

#: The cause a run failing without the signature records (``Outcome.details["cause"]``).
NO_SIGNATURE = "no-signature"


@dataclass
class AssertProbe:
    """Bad iff the output shows the signature; good on exit 0; any other failure is a skip.

    The skip is the point: a commit that fails for an unrelated reason (an import error, a build
    break) says nothing about the assertion we are hunting, so it must not be blamed.
    """

    signature: str
    kind: str = "assert"
    _pattern: re.Pattern[str] = field(init=False, repr=False)
    #: The likely fix of this probe's own skip cause, for the bisect's endpoint errors.
    fixes = {  # noqa: RUF012 - read-only, shared by every instance
        NO_SIGNATURE: "the probe failed but its output does not match --signature: check the "
        "regex against the log"
    }

    def __post_init__(self) -> None:
        try:
            self._pattern = re.compile(self.signature)
        except re.error as exc:
            raise UsageError(f"--signature {self.signature!r} is not a valid regex: {exc}") from exc

    def argv(self, command: list[str], scratch: Path) -> list[str]:
        return list(command)

    def classify(self, run: Finished) -> Outcome:
        match = self._pattern.search(run.stdout) or self._pattern.search(run.stderr)
        if match:
            return Outcome(
                Verdict.BAD, f"signature matched: {match.group(0)[:200]}", exit_code=run.exit_code
            )
        early = not_run(run)
        if early:
            return early
        if run.exit_code == 0:
            return Outcome(Verdict.GOOD, "exit 0, no signature", exit_code=0)
        return Outcome(
            Verdict.SKIP,
            f"failed without the signature (exit {run.exit_code})",
            exit_code=run.exit_code,
            details={CAUSE: NO_SIGNATURE},
        )

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "signature": self.signature}


def deepgemm_assert_probe(signature: str | None = None) -> AssertProbe:
    """Bad iff the output matches ``signature`` (default :data:`DEEPGEMM_SIGNATURE`)."""
    return AssertProbe(signature=signature or DEEPGEMM_SIGNATURE)


#: ``--probe assert`` (entry point ``regress.probes``: ``assert``).
ASSERT = Plugin(
    "assert",
    "bad iff the output matches --signature (default: DeepGEMM's DG_HOST_ASSERT(...) or "
    "AssertionError), good on exit 0, else skip",
    lambda config: deepgemm_assert_probe(config.options.get("signature")),
    (Option("signature", "--signature", "regex that marks a bad run.", metavar="RE"),),
)
