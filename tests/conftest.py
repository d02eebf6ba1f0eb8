"""Suite-wide test settings: deterministic hypothesis, no example database (xdist-safe), and a
malloc that keeps freed memory (benchmarks/suite.md says what each costs)."""

from __future__ import annotations

import ctypes
import os
import sys

#: glibc's malloc settings for this process and, through the environment, every child it starts
#: (xdist workers, probes, ``regress`` runs, nested pytest). The reference engine allocates and
#: frees float64 tensors of up to about 300 MB per step; by default glibc serves each from its own
#: ``mmap`` and unmaps it on ``free``, so the next step faults every page in again (and the kernel
#: zeroes it): that was 50 of the suite's 300 CPU seconds. No ``mmap`` for allocations and no
#: trimming of the heap's top keeps the pages for reuse; the peak memory stays what it was.
MALLOC_ENV = {
    "MALLOC_MMAP_MAX_": "0",
    "MALLOC_TRIM_THRESHOLD_": str(2**31 - 1),
    "MALLOC_TOP_PAD_": str(64 << 20),
}
_MALLOPT = {"MALLOC_MMAP_MAX_": -4, "MALLOC_TRIM_THRESHOLD_": -1, "MALLOC_TOP_PAD_": -2}


def _keep_freed_memory() -> None:
    """Apply ``MALLOC_ENV`` here (``mallopt``) and pass it on; a variable the user set wins."""
    for name, value in MALLOC_ENV.items():
        os.environ.setdefault(name, value)
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc only; musl has no mallopt
    except (OSError, AttributeError):
        return
    for name, param in _MALLOPT.items():
        mallopt(param, int(os.environ[name]))


_keep_freed_memory()

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the GPU box runs tests/integration without hypothesis
    pass
else:
    settings.register_profile(
        "regress",
        database=None,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile("regress")
