"""Sample GPU-stage tests; REGRESS_SAMPLE_RUN=baseline|current changes which ones fail.

Kept as pytest-produced JUnit XML in tests/data/junit (see regenerate.py): between the baseline
and the current run one test regresses and one gets fixed, the rest stay put.
"""

import os

import pytest

CURRENT = os.environ.get("REGRESS_SAMPLE_RUN", "current") == "current"


def test_reference_generate():
    assert sum([1, 2, 3]) == 6


def test_acceptance_batch8():
    al_batch1, al_batch8 = 3.768, (3.283 if CURRENT else 3.766)
    assert al_batch8 >= 0.95 * al_batch1, f"AL at batch 8 {al_batch8} < 0.95 * batch 1 {al_batch1}"


def test_layerwise_seq_len_q4():
    if not CURRENT:
        raise RuntimeError("DG_HOST_ASSERT(batch_size == __batch_size and next_n == _next_n)")


@pytest.mark.skip(reason="waived: https://nvbugs/5000001")
def test_waived():
    pass


@pytest.mark.xfail(reason="known: draft depth 3 acceptance is noisy", strict=True)
def test_known_noisy():
    raise AssertionError("noisy")


@pytest.fixture
def broken_engine():
    raise OSError("engine directory /models/glm missing")


def test_engine_setup(broken_engine):
    pass


@pytest.mark.parametrize("tag", ["pipe"])
def test_markup_in_message(tag):
    if CURRENT:
        raise AssertionError("expected a|b <b>bold</b> @someone `x`")
