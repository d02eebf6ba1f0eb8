"""pytest side of ``regress check``: ``--trtllm-src PATH`` (or ``$REGRESS_TRTLLM_SRC``).

Loaded by :mod:`regress.pytest_plugin` for a project that opted in (``regress = true`` in its
pytest ini, or ``-p regress.pytest_plugin``), or on its own with ``-p regress.check.plugin``;
an unrelated project with regress installed never sees the option or the fixture. Tests that take the ``trtllm_src`` fixture run the
contract scenarios against that real TensorRT-LLM tree; without one they are collected and
skipped with the reason, so a CPU CI that has no TensorRT-LLM checkout stays green and honest.
Test paths inside the tree are upstream's own unit tests: they run through the sandbox, CUDA on
the CPU (:mod:`regress.sandbox.pytest_sandbox`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from regress.check.check import ENV_VAR


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("regress").addoption(
        "--trtllm-src",
        dest="regress_trtllm_src",
        metavar="PATH",
        default=None,
        help=f"TensorRT-LLM source tree the upstream contract tests load (default ${ENV_VAR})",
    )


@pytest.fixture(scope="session")
def trtllm_src(pytestconfig: pytest.Config) -> Path:
    """The TensorRT-LLM tree given by ``--trtllm-src`` / ``$REGRESS_TRTLLM_SRC``, else skip."""
    value = pytestconfig.getoption("regress_trtllm_src") or os.environ.get(ENV_VAR)
    if not value:
        pytest.skip(f"no TensorRT-LLM source tree: pass --trtllm-src PATH or set {ENV_VAR}")
    return Path(value)


def pytest_configure(config: pytest.Config) -> None:
    value = config.getoption("regress_trtllm_src") or os.environ.get(ENV_VAR)
    if value:
        from regress.sandbox.pytest_sandbox import register

        register(config, Path(value))
