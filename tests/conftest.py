"""Suite-wide test settings: deterministic hypothesis, no example database (xdist-safe), a
malloc that keeps freed memory, and an xdist schedule that runs the longest files first
(benchmarks/suite.md says what each saves)."""

from __future__ import annotations

import ctypes
import os
import sys

import pytest

#: The files that take longest (CPU seconds at ``-n 0``, benchmarks/suite.md; the order of its
#: "Children and setup" section for the files that section measured), longest first. They
#: run first so the xdist workers end together: one started last would keep a core idle while
#: the other worker finishes it. A file missing here runs after them, in collection order.
SLOW_FIRST = (
    "test_check_matrix.py",
    "test_demo_plants.py",
    "test_upstream_isolation.py",
    "test_defect_verdicts.py",
    "test_upstream_cli.py",
    "test_demo.py",
    "test_draft_cache_defects.py",
    "test_defects.py",
    "test_trend_demo.py",
    "test_upstream_stale_state.py",
    "test_reference_engine.py",
    "test_trend_detect.py",
    "test_bisect_session.py",
    "test_pytest_plugin.py",
    "test_trend_defects.py",
    "test_trend_cli.py",
    "test_upstream_pytest_sandbox.py",
    "test_check_known.py",
    "test_sandbox_packages.py",
    "test_check_failures.py",
)

#: glibc's malloc settings for this process and, through the environment, every child it starts
#: (xdist workers, probes, ``regress`` runs, nested pytest). The reference engine allocates and
#: frees float64 tensors of up to about 300 MB per step; by default glibc serves each from its own
#: ``mmap`` and unmaps it on ``free``, so the next step faults every page in again (and the kernel
#: zeroes it): that was 50 of the suite's 300 CPU seconds. No ``mmap`` for allocations and no
#: trimming of the heap's top keeps the pages for reuse. The peak stays about what it was (1.5 GB
#: for an engine process), but a process holds it until it exits.
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


def _bytecode_outside_the_tree() -> None:
    """Where the environment forbids bytecode (``PYTHONDONTWRITEBYTECODE``), cache it in a
    temporary folder for this session (``PYTHONPYCACHEPREFIX``) instead.

    Every child the suite starts (probes, ``regress`` runs, check children, about 150) otherwise
    compiles regress's modules again, about 0.25 CPU s each; the checkout stays free of
    ``__pycache__`` as the variable asked. A prefix the user set wins; the folder goes at exit.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="regress-test-pycache-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["PYTHONPYCACHEPREFIX"] = folder
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix, sys.dont_write_bytecode = folder, False


_bytecode_outside_the_tree()

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


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Under ``-n``, schedule whole files (xdist's ``--dist loadfile``) in ``SLOW_FIRST`` order.

    A file's tests then share its module-level caches and fixtures on one worker instead of
    computing them on both (the reference-engine runs of test_defect_verdicts.py and
    test_draft_cache_defects.py are cached per module); xdist would otherwise order the files by
    their number of tests. A ``--dist`` mode or ``--loadscope-reorder`` that is asked for wins.
    """
    option = config.option
    if not getattr(option, "numprocesses", None) or option.dist != "no" or option.distload:
        return
    option.dist = "loadfile"
    if "--loadscope-reorder" not in config.invocation_params.args:
        option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the files of ``SLOW_FIRST`` first, in its order; every file keeps its own order."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
