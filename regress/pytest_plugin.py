"""regress's pytest plugin (pytest11 entry point): markers now; test lists, waives, GPU pinning later.

Inert unless its options are given: registering markers changes no test's outcome.
"""

from __future__ import annotations


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "gpu(count=1): needs CUDA devices; skipped with a reason when too few are visible"
    )
    config.addinivalue_line("markers", "trtllm: needs the optional tensorrt_llm package")
