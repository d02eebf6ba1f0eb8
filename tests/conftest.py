"""Suite-wide test settings: deterministic hypothesis, no example database (xdist-safe)."""

from __future__ import annotations

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
