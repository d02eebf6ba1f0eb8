"""The two probe scripts ``regress demo`` overlays into every worktree of its bisects.

They are written after the regressions, as a user's probe would be, and reach each commit's own
copy of the DSA code through the current directory (``REGRESS_WORKTREE``).
"""

from __future__ import annotations

from pathlib import Path

ACCEPTANCE_PROBE = "probe_acceptance.py"
LAYERWISE_PROBE = "probe_layerwise.py"

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

_ACCEPTANCE = '''"""Acceptance length at batch 8 relative to batch 1, on this commit's DSA metadata."""
import json
import os
import sys

{announce}
sys.path.insert(0, os.getcwd())
from dsa_metadata import DSAtrtllmAttentionMetadata  # noqa: E402

from regress.acceptance.stats import summarize  # noqa: E402
from regress.acceptance.trace import RequestTrace  # noqa: E402
from regress.reference.engine import ReferenceEngine  # noqa: E402
from regress.reference.prompts import load_prompts  # noqa: E402

prompts = load_prompts(int(os.environ.get("REGRESS_DEMO_PROMPTS", "6")))
tokens = int(os.environ.get("REGRESS_DEMO_TOKENS", "24"))


def acceptance_length(batch):
    engine = ReferenceEngine(defects=(), metadata_cls=DSAtrtllmAttentionMetadata)
    result = engine.generate(prompts, batch_size=batch, max_draft_len=4, max_new_tokens=tokens)
    traces = [RequestTrace(accepted=r.accepted) for r in result.requests]
    return summarize(traces, 4, n_boot=0).acceptance_length


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


def write_probes(directory: Path) -> dict[str, Path]:
    """Write both probes into ``directory``; returns name -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, text in ((ACCEPTANCE_PROBE, _ACCEPTANCE), (LAYERWISE_PROBE, _LAYERWISE)):
        (directory / name).write_text(text.replace("{announce}", _ANNOUNCE))
        out[name] = directory / name
    return out
