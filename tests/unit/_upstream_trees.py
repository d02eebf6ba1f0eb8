"""Assemble regress's own fake TensorRT-LLM trees (regress/demo/tree_parts) per era and variant.

Not a test module: imported by the upstream tests and the benchmark. A variant is the era (A, B,
C), the fix state of ``on_update_kv_lens()`` (``"pre"``: map built in ``prepare()`` only;
``"post"``: rebuilt on every call, PR #16925's shape; ``"arange"``: the closed #17240 shape) and
the layer-wise runner (``None``: absent; ``False``: no announcement; ``True``: the guarded one).
"""

from __future__ import annotations

from pathlib import Path

from regress.demo.trees import (  # noqa: F401 - re-exported for the upstream tests
    GUARD,
    HELPER,
    LAYOUT,
    PARTS,
    REFRESH,
    _fill,
    _part,
    build_tree,
    tree_files,
    write_files,
)

#: Ways a commit can fail to load (issue 24), appended to the DSA module: none is a verdict.
IMPORT_BREAKAGES = {
    "syntax_error": "def half_written(:\n",
    "nul_bytes": "STALE = 1  # \0\n",
    "raise_at_import": 'raise RuntimeError("needs the compiled extension")\n',
    "sys_exit": "import sys\n\nsys.exit(0)\n",
    "os_exit": "import os\n\nos._exit(0)\n",
    # sleeps rather than spins: still a hang, without burning a core for the whole timeout
    "hang": "import time\n\nwhile True: time.sleep(0.05)  # noqa: E701\n",
    "segfault": "import ctypes\n\nctypes.string_at(0)\n",  # compiled code crashing at import
}
#: Code put at the top of the DSA metadata's ``prepare()``: all but the last need what the
#: sandbox fakes (a gap); the last is upstream's own code failing on real inputs (a verdict).
RUN_BREAKAGES = {
    "fake_raises": "        self.kv_cache_manager.get_block_ids_per_seq([10_000])\n",
    "fake_signature": "        self.kv_cache_manager.get_block_ids_per_seq([0], stream=None)\n",
    "fake_attribute": "        self.kv_cache_manager.pool_layout_v2\n",
    # a name a package __init__ would define (the sandbox never runs it): called, or read
    "shell_name_call": "        from tensorrt_llm._torch import warmup_hook\n        warmup_hook()\n",
    "shell_attribute": "        tensorrt_llm._torch.compiled_flag\n",
    "upstream_raises": "        self.req_idx_per_token[self.max_num_tokens + 1]\n",
}
_PREPARE = "    def prepare(self):\n        super().prepare()\n"


def broken_files(how: str, era: str = "B", fix: str = "post") -> dict[str, str]:
    """:func:`tree_files` with one breakage of :data:`IMPORT_BREAKAGES` or :data:`RUN_BREAKAGES`."""
    files = tree_files(era, fix)
    rel = f"tensorrt_llm/{LAYOUT[era][1]}"
    if how in IMPORT_BREAKAGES:
        files[rel] += "\n" + IMPORT_BREAKAGES[how]
    else:
        assert _PREPARE in files[rel]
        files[rel] = files[rel].replace(_PREPARE, _PREPARE + RUN_BREAKAGES[how], 1)
    return files


def breakage_line(how: str, era: str = "B", fix: str = "post") -> int:
    """The line of the DSA module where :func:`broken_files` put the breakage (1-based)."""
    text = broken_files(how, era, fix)[f"tensorrt_llm/{LAYOUT[era][1]}"]
    if how in IMPORT_BREAKAGES:
        last = IMPORT_BREAKAGES[how].rstrip("\n").splitlines()[-1]
    else:
        last = RUN_BREAKAGES[how].rstrip("\n").splitlines()[-1]
    return text.splitlines().index(last) + 1


# --- caller trees (issue 19): upstream's workers, other DSA-family classes, newer paths ---------

FUSED_GATES = {
    # the old gate: fusion only for exactly "1" (attention/backends/sparse/dsa/metadata.py)
    "old": 'os.environ.get("TRTLLM_FUSED_DSA_METADATA", "0") == "1"',
    # the newer gate: fusion on by default (upstream's test_fused_metadata.py)
    "new": 'os.environ.get("TRTLLM_DISABLE_FUSED_DSA_METADATA", "0") != "1"',
    # a gate regress has never seen: disabled by its name's sense
    "unknown": 'os.environ.get("TRTLLM_DSA_FUSED_DECODE", "1") == "1"',
}
_FUSED_GATE_CODE = """import os

from .fused_metadata import fused_dsa_decode_metadata


def _fused_enabled():
    return {gate}
"""
_FUSED_CALL = (
    "        if _fused_enabled() and self.num_contexts == 0 and self.num_tokens > 0:\n"
    "            fused_dsa_decode_metadata(self.seq_lens_cuda[: self.num_seqs], self.req_idx_per_token)\n"
    "            self._slot_mappings()\n"
    "            return\n"
)
#: The value the fused kernel writes per token: its request (right), or the next one (a defect
#: that only the fused path has).
FUSED_KERNEL = {
    "right": "    value = req + tl.zeros([BLOCK], dtype=tl.int32)\n",
    "wrong": "    value = (req + 1) % tl.num_programs(0) + tl.zeros([BLOCK], dtype=tl.int32)\n",
}
_RESTORE_CONTEXTS = (
    "        attn_metadata.num_contexts = self._saved_num_contexts\n"
    "        attn_metadata.host_request_types.copy_(self._saved_types)\n"
)
_RAGGED_PREPARE = """        verify = self.ragged_verify_lens
        if verify:
            nc, ns = self.num_contexts, self.num_seqs
            if self.row_req_idx_cuda is None:
                self.row_req_idx_cuda = torch.zeros(self.max_num_tokens, dtype=torch.long, device="cuda")
                self.attn_row_req_idx_cuda = torch.zeros(self.max_num_tokens + ns, dtype=torch.long, device="cuda")
            rows = torch.repeat_interleave(torch.arange(ns - nc), torch.tensor(verify))
            self._ragged_num_rows = int(rows.numel())
            self.row_req_idx_cuda[: self._ragged_num_rows].copy_(rows)
            self.attn_row_req_idx_cuda[:nc].copy_(torch.arange(nc))
            self.attn_row_req_idx_cuda[nc : nc + self._ragged_num_rows].copy_(rows + nc)
"""
_RAGGED_METHODS = """    ragged_verify_lens = None
    row_req_idx_cuda = None
    attn_row_req_idx_cuda = None
    _ragged_num_rows = 0

    def apply_device_ragged_layout(self, verify_lens, req_idx, kv_correction):
        nc, rows = self.num_contexts, self._ragged_num_rows
        self.seq_lens_cuda[nc : self.num_seqs] = verify_lens.to(self.seq_lens_cuda.dtype)
        self.row_req_idx_cuda[:rows] = req_idx
        # upstream index_selects each row's pages with req_idx (186080bb): one device for both
        self.ragged_row_lens = self.seq_lens_cuda[nc : self.num_seqs].index_select(0, req_idx)
{attn_rows}        start = self.num_ctx_tokens
        self.req_idx_per_token[start : start + rows] = (req_idx + nc).to(torch.int32)

"""
#: The newer shape (dsa/metadata.py @ 186080bb): the constructor takes the ragged switch and
#: allocates the row buffers from it; windows installed without it are refused.
_RAGGED_SWITCH_INIT = (
    "    enable_ragged_verification = False\n\n"
    "    def __init__(self, *args, **kwargs):\n"
    "        self.enable_ragged_verification = bool(kwargs.pop('enable_ragged_verification', False))\n"
    "        self._init_dsa(*args, **kwargs)\n"
    "        if self.enable_ragged_verification:\n"
    "            n = self.max_num_tokens + self.max_num_sequences\n"
    "            self.row_req_idx_cuda = torch.zeros(n, dtype=torch.long, device='cuda')\n"
    "            self.attn_row_req_idx_cuda = torch.zeros(n, dtype=torch.long, device='cuda')\n\n"
)
_RAGGED_SWITCH_CHECK = (
    "        if self.ragged_verify_lens is not None and not self.enable_ragged_verification:\n"
    "            raise RuntimeError('ragged windows set, but the ragged buffers were never allocated')\n"
)
#: Upstream refusing windows regress chose, even with the switch on (a gap, never a verdict).
_RAGGED_REFUSE = (
    "        if self.ragged_verify_lens and min(self.ragged_verify_lens) < 2:\n"
    "            raise RuntimeError('every verification window must hold the bonus and a draft')\n"
)
_DSA_INIT = "    def __init__(self, *args, **kwargs):\n        self.num_sms"
_ATTN_ROWS = "        self.attn_row_req_idx_cuda[nc : nc + rows] = req_idx + nc\n"
_DRAFT_KV_METHODS = """    def prepare_for_draft_forward(self):
        saved = (self.indexer_k_cache_block_offsets, self.slot_mapping_fp8)
        mgr = self.kv_cache_manager
        ids = list(self.request_ids)[: self.num_seqs]
        self.indexer_k_cache_block_offsets = torch.zeros_like(saved[0])
        self.indexer_k_cache_block_offsets[: self.num_seqs].copy_(mgr.get_block_ids_per_seq(ids))
        self.slot_mapping_fp8 = torch.zeros_like(saved[1])
{stale}        self._slot_mappings()
        return saved

    def restore_after_draft_forward(self, saved):
        if saved is not None:
            self.indexer_k_cache_block_offsets, self.slot_mapping_fp8 = saved

"""
# a draft-forward switch that rebuilds the map from the layout prepare() saw: stale in draft steps
_DRAFT_KV_STALE = (
    "        self.req_idx_per_token[: self.num_tokens] = torch.repeat_interleave(\n"
    "            torch.arange(self.num_seqs, dtype=torch.int32),\n"
    "            torch.tensor([self.num_tokens // self.num_seqs + 1] * self.num_seqs)\n"
    "        )[: self.num_tokens]\n"
)
V4_REBUILD = {
    "post": (
        "        self.req_idx_per_token[:n] = torch.repeat_interleave(\n"
        "            torch.arange(self.num_seqs, dtype=torch.int32, device=self.seq_lens_cuda.device),"
        " self.seq_lens_cuda[: self.num_seqs]\n"
        "        )\n"
    ),
    # "rebuilds" from the map prepare() built: overwrites the base class's correct map
    "stale": "        self.req_idx_per_token[:n].copy_(self._prepared_map[:n])\n",
}


#: The V4-shaped metadata's own sibling modules, as upstream's (deepseek_v4/metadata.py @ 5ca7a947
#: raises unless its params are a DeepSeekV4MetadataParams and calls DeepseekV4Indexer.prepare).
V4_OWN_MODULES = {
    "v4-imports": "from .indexer import DeepseekV4Indexer\nfrom .params import DeepSeekV4MetadataParams\n",
    "v4-post-init": (
        "        if not isinstance(self.sparse_metadata_params, DeepSeekV4MetadataParams):\n"
        "            raise ValueError('DeepSeek-V4 sparse attention metadata params are not set')\n"
        "        assert self.sparse_metadata_params.compress_ratios\n"
    ),
    "v4-prepare": (
        "        mgr, n = self.kv_cache_manager, self.num_seqs\n"
        "        tables = torch.zeros(2, 5, n, mgr.max_blocks_per_seq, dtype=torch.int32)\n"
        "        mgr.copy_batch_sliding_block_tables(tables, self.request_ids, self.num_contexts, n)\n"
        "        DeepseekV4Indexer.prepare(metadata=self)\n"
    ),
}


def caller_files(
    era: str = "C",
    fix: str = "post",
    *,
    workers: tuple[str, ...] = ("eagle3",),
    restore_contexts: bool = True,
    fused: str | None = None,
    fused_kernel: str = "right",
    event: bool = False,
    ragged: str | None = None,
    ragged_switch: bool | str = False,
    draft_kv: str | None = None,
    v4: str | None = None,
    qsa: str | None = None,
    guard: bool | None = True,
    v4_own_modules: bool = False,
) -> dict[str, str]:
    """:func:`tree_files` plus the shapes of upstream's callers and newer paths (see the README)."""
    backends, dsa = LAYOUT[era]
    files = tree_files(era, fix, guard)
    rel = f"tensorrt_llm/{dsa}"
    meta = files[rel]
    if fused:
        meta = _fill(meta, "fused-gate", _FUSED_GATE_CODE.format(gate=FUSED_GATES[fused]))
        meta = _fill(meta, "fused-call", _FUSED_CALL)
        kernel = _fill(_part("fused_metadata.py"), "kernel-value", FUSED_KERNEL[fused_kernel])
        files[f"tensorrt_llm/{dsa.rsplit('/', 1)[0]}/fused_metadata.py"] = kernel
    if event:
        meta = _fill(meta, "prepare-end", "        torch.cuda.Event().record()\n")
    methods = ""
    if ragged:
        prepare = _RAGGED_PREPARE
        if ragged_switch:  # buffers from the constructor's switch, not allocated in prepare()
            assert _DSA_INIT in meta
            meta = meta.replace(
                _DSA_INIT, _RAGGED_SWITCH_INIT + _DSA_INIT.replace("__init__", "_init_dsa"), 1
            )
            head, _, tail = prepare.partition("            rows = ")
            prepare = (
                _RAGGED_SWITCH_CHECK
                + head.split("            if self.row_req_idx_cuda")[0]
                + "            rows = "
                + tail
            )
        if ragged_switch == "refuses":
            prepare = _RAGGED_REFUSE + prepare
        meta = _fill(meta, "ragged-prepare", prepare)
        methods += _RAGGED_METHODS.format(attn_rows=_ATTN_ROWS if ragged == "post" else "")
    if draft_kv:
        stale = _DRAFT_KV_STALE if draft_kv == "stale" else ""
        methods += _DRAFT_KV_METHODS.format(stale=stale)
        files[f"tensorrt_llm/{backends}/interface.py"] = _fill(
            files[f"tensorrt_llm/{backends}/interface.py"],
            "draft-kv-field",
            "    draft_kv_cache_manager: Optional[object] = None\n",
        )
    files[rel] = _fill(meta, "extra-methods", methods)
    pkg = "tensorrt_llm." + backends.replace("/", ".")
    init = f"tensorrt_llm/{backends}/__init__.py"
    files[init] += "from .interface import AttentionMetadata  # noqa: F401\n"
    if workers:
        spec = "tensorrt_llm/_torch/speculative"
        files[f"{spec}/__init__.py"] = _part("pkg_init.py")
        interface = _part("spec_interface.py")
        files[f"{spec}/interface.py"] = _fill(
            interface, "restore-contexts", _RESTORE_CONTEXTS if restore_contexts else ""
        )
        for name in workers:
            files[f"{spec}/{name}.py"] = _part(f"{name}.py").replace("{BACKENDS_PKG}", pkg)
    sparse = f"tensorrt_llm/{backends}/sparse"
    if v4:
        files[f"{sparse}/deepseek_v4/__init__.py"] = _part("pkg_init.py")
        v4_meta = _fill(_part("deepseek_v4.py"), "v4-rebuild", V4_REBUILD[v4])
        if v4_own_modules:  # its own params (type-checked) and indexer (called), as upstream's
            for marker, code in V4_OWN_MODULES.items():
                v4_meta = _fill(v4_meta, marker, code)
            files[f"{sparse}/deepseek_v4/params.py"] = _part("deepseek_v4_params.py")
            files[f"{sparse}/deepseek_v4/indexer.py"] = _part("deepseek_v4_indexer.py")
        files[f"{sparse}/deepseek_v4/metadata.py"] = v4_meta
    if qsa:
        files[f"{sparse}/qsa/__init__.py"] = _part("pkg_init.py")
        refresh = "        self._rebuild_qsa_map()\n" if qsa == "post" else ""
        files[f"{sparse}/qsa/metadata.py"] = _fill(_part("qsa.py"), "qsa-refresh", refresh)
    return files


def build_caller_tree(root: Path, era: str = "C", fix: str = "post", **variant) -> Path:
    """Write one caller tree (:func:`caller_files`) under ``root`` and return ``root``."""
    return write_files(root, caller_files(era, fix, **variant))


def tree_sandbox(root, *extra, ledger=None):
    """A sandbox over the tree at ``root`` as ``regress check`` plans it (its real modules plus
    ``extra``), with the default settings' values: for tests of the sandbox itself."""
    from regress.sandbox import Ledger
    from regress.sandbox.eras import Settings, all_values, plan_for
    from regress.sandbox.shells import Sandbox
    from regress.tree.source import resolve_source_tree

    plan = plan_for(resolve_source_tree(root))
    return Sandbox(
        plan.checkout,
        [*plan.real, *extra],
        all_values(plan, Settings()),
        env=plan.env,
        ledger=ledger or Ledger(),
    )
