"""The DeepGEMM-assert bisect probe (``--probe assert``): a run that aborts on bug 2's assertion.

Bug 2 (an unannounced MTP shape) kills the process on DeepGEMM's host assertion in
``fp8_paged_mqa_logits``. This module gives the generic :class:`regress.bisect.probes.AssertProbe`
that signature as its default and registers it by name with the bisect (importing this module is
what makes ``--probe assert`` exist; the ``regress`` CLI and ``regress demo`` do).
"""

from __future__ import annotations

import re

from regress.bisect.probes import AssertProbe
from regress.bisect.registry import register_probe
from regress.dsa.announce import DEEPGEMM_ASSERT

#: DeepGEMM's host assertion (``csrc/apis/attention.hpp``, any condition) or any Python assertion.
DEEPGEMM_SIGNATURE = re.escape(DEEPGEMM_ASSERT.partition("(")[0]) + r"\(.*\)|AssertionError"


def deepgemm_assert_probe(signature: str | None = None) -> AssertProbe:
    """Bad iff the output matches ``signature`` (default :data:`DEEPGEMM_SIGNATURE`)."""
    return AssertProbe(signature=signature or DEEPGEMM_SIGNATURE)


register_probe(
    "assert", lambda config: deepgemm_assert_probe(config.signature), reads=("signature",)
)
