"""Acceptance profiler: per-position MTP acceptance per batch size, judged against batch 1.

Entry point: :func:`regress.acceptance.profile.profile`; the CLI is ``regress accept``.
"""
