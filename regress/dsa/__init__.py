"""The DSA metadata contracts the two upstream bugs broke, as executable, device-agnostic code.

Owns: the batch layout of a forward and the executor's "set the batch, then prepare()"
(``batch``); the contracts (``mapping``, ``announce``, ``invariants``); upstream's per-forward
order and draft loop as one model (``lifecycle``, ``transitions``); the runtime ``sentinel``; and
the name-free stale-state oracle (``staleness``, ``state_fields``, ``fresh``, ``write_log``,
``stale_check``, ``stale_allow``, ``stale_batches``). Imports nothing of ``regress`` outside
itself: the reference engine, the TensorRT-LLM hooks and ``regress check`` drive it.
"""

from regress.dsa.announce import DEEPGEMM_ASSERT, announce_mtp_shapes, announce_speculation
from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.invariants import (
    Violation,
    check_dense_untouched,
    check_kv_lens_2d_width,
    check_req_idx_map,
)
from regress.dsa.lifecycle import Event, run_forwards, serving_forwards
from regress.dsa.mapping import build_req_idx_per_token, expected_req_idx_per_token

__all__ = [
    "DEEPGEMM_ASSERT",
    "Batch",
    "Event",
    "Violation",
    "announce_mtp_shapes",
    "announce_speculation",
    "build_req_idx_per_token",
    "check_dense_untouched",
    "check_kv_lens_2d_width",
    "check_req_idx_map",
    "expected_req_idx_per_token",
    "prepare_batch",
    "run_forwards",
    "serving_forwards",
]
