"""The probe scripts ``regress demo`` overlays into every worktree of its bisects.

They are written after the regressions, as a user's probe would be, and reach each commit's own
copy of the DSA code through the current directory (``REGRESS_WORKTREE``): the metadata class,
the layer-wise runner and the draft-cache choices (``regress.demo.plants`` says which probe hunts
which defect).
"""

from __future__ import annotations

from pathlib import Path

from regress.demo.plants import ACCEPTANCE_PROBE, CONTRACT_PROBE, LAYERWISE_PROBE, SERVING_PROBE

#: Set to 1 by the index-share plant's bisect: the acceptance probe then runs the index-share
#: configuration at K = 7, where partial acceptance is the common case (PR #15806's review).
INDEX_SHARE_ENV = "REGRESS_DEMO_INDEX_SHARE"

#: Environment variable naming the file each probe run appends its commit to as it starts; the
#: demo watches it to show progress while a bisect checks its endpoints.
EVENTS_ENV = "REGRESS_DEMO_EVENTS"

# Appends one line per probe run: "<commit>\n" (a single small O_APPEND write, so concurrent
# runs never interleave within a line).
_ANNOUNCE = """_events = os.environ.get("REGRESS_DEMO_EVENTS")
if _events:
    with open(_events, "a", encoding="utf-8") as _fh:
        _fh.write(os.environ.get("REGRESS_COMMIT", "unknown") + "\\n")
"""

_ACCEPTANCE = '''"""Acceptance length at batch 1 and 8 and their ratio, on this commit's DSA code."""
import json
import os
import sys

{announce}
sys.path.insert(0, os.getcwd())
import draft_cache  # noqa: E402
from dsa_metadata import DSAtrtllmAttentionMetadata  # noqa: E402

from regress.acceptance.stats import summarize  # noqa: E402
from regress.acceptance.trace import RequestTrace  # noqa: E402
from regress.reference.engine import ReferenceEngine  # noqa: E402
from regress.reference.model import ModelConfig, index_share_config  # noqa: E402
from regress.reference.prompts import load_prompts  # noqa: E402

prompts = load_prompts(int(os.environ.get("REGRESS_DEMO_PROMPTS", "6")))
tokens = int(os.environ.get("REGRESS_DEMO_TOKENS", "24"))
share = os.environ.get("{share}") == "1"
config = index_share_config(ModelConfig()) if share else ModelConfig()
k = 7 if share else 4


def acceptance_length(batch):
    engine = ReferenceEngine(
        defects=(),
        metadata_cls=DSAtrtllmAttentionMetadata,
        draft_cache=draft_cache,
        config=config,
    )
    result = engine.generate(prompts, batch_size=batch, max_draft_len=k, max_new_tokens=tokens)
    traces = [RequestTrace(accepted=r.accepted) for r in result.requests]
    return summarize(traces, k, n_boot=0).acceptance_length


al1, al8 = acceptance_length(1), acceptance_length(8)
print(json.dumps({"al_batch1": al1, "al_batch8": al8, "al_ratio": al8 / al1}))
'''

_LAYERWISE = '''"""Layer-wise GEN step on a DSA model: batch 32, seq_len_q 4, this commit's runner."""
import os
import sys

{announce}
sys.path.insert(0, os.getcwd())
from layerwise_runner import create_run_pack, run_generation_step  # noqa: E402

md = create_run_pack("GEN", batch_size=32, seq_len_q=4, seq_len_kv_cache=256, defects=())
print("indexer shapes ok:", run_generation_step(md))
'''


_CONTRACTS = '''"""The map, block-table and dense-backend contracts on this commit's metadata and runner (exit 1: broken)."""
import os
import sys

{announce}
sys.path.insert(0, os.getcwd())
from dsa_metadata import DSAtrtllmAttentionMetadata  # noqa: E402
from layerwise_runner import create_run_pack  # noqa: E402

from regress.dsa.invariants import check_dense_untouched, check_req_idx_map  # noqa: E402
from regress.dsa.invariants import snapshot_spec_state  # noqa: E402
from regress.dsa.lifecycle import run_forwards, serving_forwards  # noqa: E402
from regress.reference.cache import PagedKVCacheManager  # noqa: E402

found = []
# A tree-drafting layout ([3, 1, 4, 1] tokens per request) after a 4-request verify forward.
md = DSAtrtllmAttentionMetadata(
    max_num_requests=4,
    max_num_tokens=32,
    kv_cache_manager=PagedKVCacheManager.for_requests(4, 512, tokens_per_block=16),
    defects=(),
)
run_forwards(
    md,
    serving_forwards(batch_size=4, max_draft_len=3, generations=1, draft_seq_lens=[3, 1, 4, 1]),
    max_draft_len=3,
    observer=lambda e, m: found.extend(check_req_idx_map(m) if e.guaranteed else []),
)
# A non-DSA layer-wise GEN pack at seq_len_q 4 must keep its spec-dec fields.
pack = {"batch_size": 8, "seq_len_kv_cache": 64, "backend": "trtllm", "defects": ()}
pristine = snapshot_spec_state(create_run_pack("GEN", seq_len_q=1, **pack))
found += check_dense_untouched(pristine, create_run_pack("GEN", seq_len_q=4, **pack))
# The top-k conversion's block table covers every block a chained draft step reaches: request 2
# (60 cached + 4 verified) writes its first chained draft at position 64, block 2 of 32 tokens.
from regress.dsa.announce import announce_speculation  # noqa: E402
from regress.dsa.batch import Batch, prepare_batch  # noqa: E402
from regress.dsa.invariants import Violation  # noqa: E402
from regress.dsa.transitions import advance, collapse, save_target  # noqa: E402

md = DSAtrtllmAttentionMetadata(
    max_num_requests=4,
    max_num_tokens=32,
    kv_cache_manager=PagedKVCacheManager.for_requests(4, 512, tokens_per_block=32),
    defects=(),
)
announce_speculation(md, 4, 3)
prepare_batch(md, Batch(seq_lens=(4, 4, 4, 4), cached=(40, 27, 60, 90)))
collapse(md, save_target(md), 3, [4, 4, 4, 4])
advance(md, 4)
for r, kv in enumerate(md.kv_lens_cuda[:4].tolist()):
    row = md.block_table[r, : -(-kv // 32)].tolist()
    if min(row) < 0:
        found.append(Violation("block_table", f"row {r} (kv {kv}) reads {row}: a block is padding"))
for v in found:
    print(f"VIOLATION [{v.check}] {v.message}")
print(f"{len(found)} contract violation(s)")
sys.exit(1 if found else 0)
'''

_SERVING = '''"""Serve the built-in prompts at batch 8 on this commit's draft-cache choices."""
import os
import sys

{announce}
sys.path.insert(0, os.getcwd())
import draft_cache  # noqa: E402

from regress.reference.engine import ReferenceEngine  # noqa: E402
from regress.reference.prompts import load_prompts  # noqa: E402

engine = ReferenceEngine(defects=(), draft_cache=draft_cache)
result = engine.generate(load_prompts(8), batch_size=8, max_draft_len=4, max_new_tokens=4)
print("served", len(result.requests), "requests")
'''


def write_probes(directory: Path) -> dict[str, Path]:
    """Write every probe into ``directory``; returns name -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, text in (
        (ACCEPTANCE_PROBE, _ACCEPTANCE),
        (LAYERWISE_PROBE, _LAYERWISE),
        (CONTRACT_PROBE, _CONTRACTS),
        (SERVING_PROBE, _SERVING),
    ):
        text = text.replace("{announce}", _ANNOUNCE).replace("{share}", INDEX_SHARE_ENV)
        (directory / name).write_text(text)
        out[name] = directory / name
    return out
