"""Sample CPU-stage tests whose pytest JUnit output is kept in tests/data/junit (see regenerate.py)."""

import pytest


def test_parse_stage_list():
    stage = "H200-PyTorch-1"
    assert stage.partition("-")[0] == "H200"


@pytest.mark.parametrize("batch", [1, 8])
def test_batch_invariance(batch):
    assert batch in (1, 8)


@pytest.mark.skip(reason="gpu: needs 1 CUDA device, 0 visible")
def test_needs_gpu():
    pass
