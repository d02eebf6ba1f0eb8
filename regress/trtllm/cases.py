"""The TensorRT-LLM acceptance matrix: models as upstream's tests run them, and the axes bugs live on.

Every ``LLM(...)`` field a case passes is upstream's, from the test of the same model
(``ModelCase.upstream``), or a named deviation in :data:`DEVIATIONS` set by one of the case's
parameters. ``tests/data/trtllm/upstream_llm_kwargs.yaml`` transcribes upstream's fields (file and
commit per row); ``tests/unit/test_trtllm_upstream_fields.py`` holds every case to it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.trtllm.llm_config import LlmSpec
from regress.trtllm.models import DEEPSEEK_V32, GLM52, MODELS, ModelCase

# The models are defined in ``regress.trtllm.models``; the matrix is where tests look them up.
__all__ = [
    "DEEPSEEK_V32",
    "DEVIATIONS",
    "GLM52",
    "MODELS",
    "Case",
    "Counterpart",
    "Deviation",
    "ModelCase",
    "cases",
    "index_share_cases",
    "kv_manager_cases",
    "pool_fill_cases",
]

BATCH_SIZES: tuple[int, ...] = (1, 8, 32)
DRAFT_LENS: tuple[int, ...] = (1, 3, 4)
CUDA_GRAPH: tuple[bool, ...] = (False, True)
NUM_PROMPTS = 80
# Long enough for ~60 verify steps per request at AL ~ 4 (about 5,000 steps per run at K=4, enough
# for per-position rates to +-0.02 at 95%), short enough for 18 runs per model in a nightly stage.
MAX_NEW_TOKENS = 256
# Relative drop from batch 1 tolerated before a significant loss is a regression. Healthy runs
# differ by < 1% (GLM-5.2 K=4: 3.768 at batch 1, 3.766 at batch 8); the stale-map bug costs 13% AL
# and 29% conditional acceptance at depth 4, so 5% separates them with room on both sides.
TOLERANCE = 0.05

# The axes of the bug classes upstream fixed after PR #16925 (each line names its PR).
#: #18662: AL 1.0 with ``use_kv_cache_manager_v2=False`` on DSA (seen at K=1 on H200).
KV_MANAGERS: tuple[str, ...] = ("v2", "v1")
KV_AXIS = {"batch_sizes": (1, 8), "draft_lens": (1, 3), "cuda_graph": (True,)}
#: #15806 review / #19138: the index-share top-k stash under partial acceptance at batch > 1.
INDEX_SHARE: tuple[bool, ...] = (True, False)
SHARE_AXIS = {"batch_sizes": (1, 8, 32), "draft_lens": (3, 4), "cuda_graph": (True,)}
#: #18660: with KV manager V2 the DSA indexer cache pool is outside admission; filling it aborts.
POOL_FILL_DRAFT_LENS: tuple[int, ...] = (1, 3)
POOL_FILL_BATCH = 32
POOL_FILL_REQUESTS = 64
# About 5,000 tokens of English text: long next to the pool, short of max_seq_len 8192 with
# MAX_NEW_TOKENS left for the answer.
POOL_FILL_PREFIX_CHARS = 20_000
# Four full-length (8192-token) sequences' worth of KV: 32 requests of a ~5,000-token shared
# prefix need several times that, so admission, not the pool, has to hold requests back.
POOL_FILL_KV_TOKENS = 4 * 8192

_KV_FLAG = {None: None, "v2": True, "v1": False}


@dataclass(frozen=True)
class Deviation:
    """A field a case passes differently from upstream's test, and the parameter that does it.

    ``parameter`` is a :class:`Case` field (the field differs only when the case sets it away
    from upstream's value) or ``"always"``.
    """

    parameter: str
    why: str


#: Every field a case may pass unlike upstream's test (a dotted key covers its sub-fields).
DEVIATIONS: dict[str, Deviation] = {
    "max_batch_size": Deviation(
        "batch_size",
        "pinned to the batch under test, so the scheduler reaches it and never exceeds it "
        "(upstream: GLM-5.2 the LLM default, DeepSeek-V3.2 24); test_upstream_config runs "
        "upstream's value",
    ),
    "speculative_config.max_draft_len": Deviation(
        "max_draft_len", "K is an axis (1, 3, 4); upstream runs its own parameter at 1 or 3"
    ),
    "speculative_config.num_nextn_predict_layers": Deviation(
        "max_draft_len", "K is an axis (1, 3, 4); upstream's mtp_nextn runs at 0, 1 or 3"
    ),
    "speculative_config.mtp_eagle_one_model": Deviation(
        "always",
        "explicit True: one-model MTP-Eagle is the draft loop under test; also the default "
        "(llm_args.py @ 00043967)",
    ),
    "cuda_graph_config": Deviation(
        "cuda_graph", "the eager axis (None), upstream's own cuda_graph parameter"
    ),
    "enable_iter_perf_stats": Deviation(
        "always",
        "llm.get_stats() specDecodingStats, which upstream's compute_acceptance_length needs",
    ),
    "enable_attention_dp": Deviation(
        "attention_dp",
        "off in the matrix: attention DP spreads the requests in flight over the ranks (batch 8 "
        "on 8 ranks is about one request per DSA metadata object), where batch-dependent bugs "
        "cannot show; upstream's baseline_mtp1 runs it on, as test_upstream_config does",
    ),
    "kv_cache_config.enable_block_reuse": Deviation(
        "block_reuse", "off only where reuse is suspected of confounding AL; default upstream's"
    ),
    "kv_cache_config.use_kv_cache_manager_v2": Deviation(
        "kv_manager", "the #18662 axis: V1 KVCacheManager + DSACacheManager against V2"
    ),
    "sparse_attention_config.index_share_for_mtp_iteration": Deviation(
        "index_share", "the #15806 axis: indexer top-k shared across draft steps or not"
    ),
    "kv_cache_config.max_tokens": Deviation(
        "pool_tokens", "the #18660 case: a pool the prefix-shared load must overfill"
    ),
}


@dataclass(frozen=True)
class Counterpart:
    """The run a case is compared with besides its batch-1 reference (one of the new axes).

    Attributes:
        check: the verdict's name (``kv_manager_parity``, ``index_share_decay``).
        case: the counterpart case (same batch, the axis at its other value).
        label: what the counterpart is, for messages.
    """

    check: str
    case: Case
    label: str


@dataclass(frozen=True)
class Case:
    """One cell of the matrix: a model at one batch size, draft length and CUDA-graph setting.

    The other parameters default to upstream's value; each one set away from it shows in the id
    and makes the fields :data:`DEVIATIONS` names for it differ from upstream's test.

    Attributes:
        kv_manager: ``"v1"``/``"v2"`` (``use_kv_cache_manager_v2`` False/True), None: "auto".
        index_share: ``index_share_for_mtp_iteration``, None: the checkpoint's.
        block_reuse: ``enable_block_reuse``, None: upstream's (on).
        attention_dp: attention data parallelism (the matrix runs it off: :data:`DEVIATIONS`).
        pool_tokens: ``KvCacheConfig.max_tokens`` for the pool-fill case, else None.
    """

    model: ModelCase
    batch_size: int
    max_draft_len: int
    cuda_graph: bool
    kv_manager: str | None = None
    index_share: bool | None = None
    block_reuse: bool | None = None
    attention_dp: bool = False
    pool_tokens: int | None = None

    @property
    def key_id(self) -> str:
        """The id without the batch size: ``k4-graph-kvv1``; one reference serves all batches."""
        parts = [f"k{self.max_draft_len}", "graph" if self.cuda_graph else "eager"]
        if self.kv_manager is not None:
            parts.append(f"kv{self.kv_manager}")
        if self.index_share is not None:
            parts.append("share" if self.index_share else "noshare")
        if self.block_reuse is False:
            parts.append("noreuse")
        if self.attention_dp:
            parts.append("adp")
        if self.pool_tokens is not None:
            parts.append("pool")
        return "-".join(parts)

    @property
    def id(self) -> str:
        """Test id: ``b8-k4-graph``, ``b8-k3-graph-kvv1``, ``b32-k3-graph-share``."""
        return f"b{self.batch_size}-{self.key_id}"

    @property
    def series(self) -> Case:
        """Cases that share a batch-1 reference: every parameter but the batch size."""
        return self.reference

    @property
    def reference(self) -> Case:
        """The batch-1 case this one is judged against."""
        return dataclasses.replace(self, batch_size=1)

    @property
    def counterpart(self) -> Counterpart | None:
        """The other end of this case's bug axis, at the same batch size, if it has one."""
        if self.kv_manager == "v1":
            return Counterpart(
                "kv_manager_parity", dataclasses.replace(self, kv_manager="v2"), "KV manager V2"
            )
        if self.index_share is True and self.batch_size > 1:
            return Counterpart(
                "index_share_decay", dataclasses.replace(self, index_share=False), "share off"
            )
        return None

    def deviations(self) -> set[str]:
        """The parameters set away from upstream's test (``batch_size``: always pinned)."""
        upstream_dp = bool(dict(self.model.options).get("enable_attention_dp", False))
        found = {"batch_size"}
        checks = {
            "max_draft_len": self.max_draft_len != self.model.acceptance_draft_len,
            "cuda_graph": not self.cuda_graph,
            "kv_manager": self.kv_manager is not None,
            "index_share": self.index_share is not None,
            "block_reuse": self.block_reuse is not None,
            "attention_dp": self.attention_dp != upstream_dp,
            "pool_tokens": self.pool_tokens is not None,
        }
        return found | {name for name, differs in checks.items() if differs}

    def reference_keys(self, test_name: str = "test_acceptance") -> tuple[str, ...]:
        """Keys of our own ``acceptance_length.yaml`` references for this case, most specific first.

        AL does not depend on the batch size when nothing is broken, so a key names every other
        parameter (``TestGLM52NVFP4::test_acceptance[k4-graph]``), then K alone. Upstream's key
        (``ModelCase.acceptance_key``) is not among them: it was measured on upstream's workload
        (GSM8K, up to 128 requests in flight) and gates only that workload
        (``regress.trtllm.harness``).
        """
        base = f"{self.model.test_class}::{test_name}"
        return (f"{base}[{self.key_id}]", f"{base}[k{self.max_draft_len}]")

    def spec(self, model_dir: Path | str, *, sm: int | None = None, **overrides: Any) -> LlmSpec:
        """The ``LLM`` spec for this case with the checkpoint at ``model_dir``."""
        fields = self.model.spec_options(sm)
        upstream_dp = bool(fields.get("enable_attention_dp", False))
        fields.update(
            max_batch_size=self.batch_size,
            max_draft_len=self.max_draft_len,
            mtp_spelling=self.model.mtp_spelling,
            cuda_graph_config=self.model.cuda_graph if self.cuda_graph else None,
            enable_block_reuse=self.block_reuse,
            use_kv_cache_manager_v2=_KV_FLAG[self.kv_manager],
            kv_cache_max_tokens=self.pool_tokens,
        )
        if self.attention_dp != upstream_dp:
            fields["enable_attention_dp"] = self.attention_dp
        if self.index_share is not None:
            sparse = dict(fields.get("sparse_attention") or {})
            sparse["index_share_for_mtp_iteration"] = self.index_share
            fields["sparse_attention"] = sparse
        fields.update(overrides)
        return LlmSpec(
            model=str(model_dir), tensor_parallel_size=self.model.tensor_parallel_size, **fields
        )


def cases(
    model: ModelCase,
    *,
    batch_sizes: tuple[int, ...] = BATCH_SIZES,
    draft_lens: tuple[int, ...] = DRAFT_LENS,
    cuda_graph: tuple[bool, ...] = CUDA_GRAPH,
    **params: Any,
) -> Iterator[Case]:
    """Every case of one model, grouped so cases sharing a batch-1 reference are adjacent.

    ``params`` are further :class:`Case` fields, the same for every case.
    """
    for graph, k, b in itertools.product(cuda_graph, draft_lens, batch_sizes):
        yield Case(model, b, k, graph, **params)


def kv_manager_cases(model: ModelCase) -> Iterator[Case]:
    """The #18662 axis: V2 then V1 at the same batch sizes; each V1 case is judged against V2."""
    for kv in KV_MANAGERS:
        yield from cases(model, **KV_AXIS, kv_manager=kv)


def index_share_cases(model: ModelCase) -> Iterator[Case]:
    """The #15806 axis: share off, then on; at batch > 1 share-on is judged against share-off."""
    if not model.index_share_axis:
        return
    for share in reversed(INDEX_SHARE):
        yield from cases(model, **SHARE_AXIS, index_share=share)


def pool_fill_cases(model: ModelCase) -> Iterator[Case]:
    """The #18660 case: KV manager V2, block reuse on, a pool the prefix-shared load overfills."""
    for k in POOL_FILL_DRAFT_LENS:
        yield Case(
            model, POOL_FILL_BATCH, k, True, kv_manager="v2", pool_tokens=POOL_FILL_KV_TOKENS
        )
