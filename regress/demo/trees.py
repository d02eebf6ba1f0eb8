"""regress's own fake TensorRT-LLM trees: the shape of upstream's DSA metadata code per era, no
upstream source.

``regress demo --check`` builds two of them (the map refreshed after the draft loop or not) to show
``regress check`` at work without a TensorRT-LLM checkout, and the upstream tests build every
variant (``tests/unit/_upstream_trees.py`` adds the broken and caller trees). A variant is the era
(A, B, C), the fix state of ``on_update_kv_lens()`` (``"pre"``: map built in ``prepare()`` only;
``"post"``: rebuilt on every call, PR #16925's shape; ``"arange"``: the closed #17240 shape) and the
layer-wise runner (``None``: absent; ``False``: no announcement; ``True``: the guarded one). The
parts (``tree_parts/*.py.in``) are templates; ``tree_parts/README.md`` says what each holds.
"""

from __future__ import annotations

from pathlib import Path

from regress.tree.eras import ERAS

#: The template parts the trees are assembled from.
PARTS = Path(__file__).resolve().parent / "tree_parts"

#: Per era: backend package dir and DSA module file, relative to tensorrt_llm/ (read off the one
#: era table, :data:`regress.tree.eras.ERAS`, so a fake tree is laid out as detection expects).
LAYOUT = {era.name: (era.backends, era.dsa_metadata) for era in ERAS}

HELPER = """

def build_req_idx_per_token(seq_lens, num_tokens):
    cu = torch.cumsum(seq_lens, dim=0, dtype=torch.int32)
    tokens = torch.arange(num_tokens, device=seq_lens.device, dtype=torch.int32)
    return torch.searchsorted(cu, tokens, right=True)
"""
REFRESH = {
    "pre": "",
    "helper": "",  # the #16925 helper exists, but on_update_kv_lens() does not call it
    "post": (
        "        if self.num_tokens > 0:\n"
        "            self.req_idx_per_token[: self.num_tokens].copy_(\n"
        "                build_req_idx_per_token(self.seq_lens_cuda[: self.num_seqs], self.num_tokens)\n"
        "            )\n"
    ),
    "arange": (
        "        if self.num_tokens == self.num_seqs:\n"
        "            self.req_idx_per_token[: self.num_tokens].copy_(\n"
        "                torch.arange(self.num_tokens, dtype=torch.int32)\n"
        "            )\n"
    ),
}
GUARD = (
    '        if run_type == "GEN" and seq_len_q > 1 and hasattr(attn_metadata, "kv_lens_cuda_2d"):\n'
    "            attn_metadata.update_spec_dec_param(\n"
    "                batch_size=batch_size, is_spec_decoding_enabled=False, is_spec_dec_tree=False,\n"
    "                is_spec_dec_dynamic_tree=False, max_draft_len=seq_len_q - 1,\n"
    "                max_total_draft_tokens=seq_len_q - 1,\n"
    "            )\n"
)


def _part(name: str) -> str:
    return (PARTS / f"{name}.in").read_text()


def _fill(text: str, marker: str, code: str) -> str:
    line = f"# FIXTURE: {marker}"
    indent = next(
        (ln[: len(ln) - len(ln.lstrip())] for ln in text.splitlines() if ln.strip() == line), ""
    )
    return text.replace(f"{indent}{line}\n", code)


def tree_files(era: str = "B", fix: str = "pre", guard: bool | None = None) -> dict[str, str]:
    """The files of one fake tree, relative to the checkout root."""
    backends, dsa = LAYOUT[era]
    pkg = "tensorrt_llm." + backends.replace("/", ".")
    dsa_dir = dsa.rsplit("/", 1)[0]
    files: dict[str, str] = {}
    init = _part("pkg_init.py")
    # package __init__ files on the way to every module, each importing missing compiled code
    for d in (
        "",
        "_torch",
        backends,
        f"{backends}/sparse",
        dsa_dir,
        "tools",
        "tools/layer_wise_benchmarks",
    ):
        files[f"tensorrt_llm/{d}/__init__.py".replace("//", "/")] = init
    interface = _part("interface.py")
    interface = _fill(
        interface,
        "sparse-config-field",
        {
            "A": "    sparse_attention_config: Optional[object] = None\n",
            "B": "",
            "C": "    sparse_metadata_params: Optional[object] = None\n",
        }[era],
    )
    files[f"tensorrt_llm/{backends}/interface.py"] = interface
    files[f"tensorrt_llm/{backends}/trtllm.py"] = _part("trtllm.py")
    meta = _part("metadata.py").replace("{BACKENDS}", pkg)
    meta = _fill(meta, "helper", HELPER if fix in ("post", "helper") else "")
    meta = _fill(meta, "refresh", REFRESH[fix])
    if era == "C":
        meta = _fill(
            meta,
            "params-import",
            "from .cache_manager import is_dsa_cache_manager\nfrom .params import DSAMetadataParams\n",
        )
        meta = _fill(
            meta,
            "topk",
            "        if self.sparse_metadata_params is None:\n"
            '            raise ValueError("DSA metadata needs sparse_metadata_params")\n'
            "        self.topk = self.sparse_metadata_params.index_topk\n",
        )
        meta = _fill(
            meta,
            "cache-manager-check",
            "        assert is_dsa_cache_manager(self.kv_cache_manager)\n",
        )
        files[f"tensorrt_llm/{dsa_dir}/params.py"] = _part("params.py")
        files[f"tensorrt_llm/{dsa_dir}/cache_manager.py"] = _part("cache_manager.py")
    else:
        meta = _fill(meta, "params-import", "")
        meta = _fill(meta, "topk", "        self.topk = self.sparse_attention_config.index_topk\n")
        meta = _fill(meta, "cache-manager-check", "")
    if era == "A":  # one file: the indexer helpers live in dsa.py
        meta = _fill(meta, "indexer-import", "")
        head, _, body = meta.partition('"""\n')
        index_code = _part("indexer.py").split('"""\n', 1)[1].replace("import torch\n", "")
        meta = head + '"""\n' + body.replace("\n\nclass ", index_code + "\n\nclass ", 1)
        del files[f"tensorrt_llm/{dsa_dir}/__init__.py"]  # sparse/ itself stays a package
        files[f"tensorrt_llm/{backends}/sparse/__init__.py"] = init
    else:
        meta = _fill(meta, "indexer-import", "from .indexer import _compute_slot_mappings\n")
        files[f"tensorrt_llm/{dsa_dir}/indexer.py"] = _part("indexer.py")
        exported = "DSAtrtllmAttentionMetadata" + (
            ", build_req_idx_per_token" if fix in ("post", "helper") else ""
        )
        files[f"tensorrt_llm/{dsa_dir}/__init__.py"] = (
            init + f"from .metadata import {exported}  # noqa: F401\n"
        )
    files[f"tensorrt_llm/{dsa}"] = meta
    if guard is None:
        for d in ("tools", "tools/layer_wise_benchmarks"):
            del files[f"tensorrt_llm/{d}/__init__.py"]
    else:
        runner = _fill(_part("runner.py"), "guard", GUARD if guard else "")
        files["tensorrt_llm/tools/layer_wise_benchmarks/runner.py"] = runner
    return files


def build_tree(root: Path, era: str = "B", fix: str = "pre", guard: bool | None = None) -> Path:
    """Write one fake tree under ``root`` (the checkout root) and return ``root``."""
    return write_files(root, tree_files(era, fix, guard))


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path -> text) under ``root``; return ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
