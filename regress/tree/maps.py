"""Every token-to-request map a DSA-family metadata object carries, and the DSA-family classes.

The map contract (:func:`regress.dsa.invariants.check_req_idx_map`) is written against a layout
and a buffer, not a class; here it is applied to every map an object has, after any call:

* ``req_idx_per_token``: DSA and every subclass (DeepSeek-V4 rebuilt it again in
  ``_compute_token_positions`` in an older stored version of
  ``tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/metadata.py``, commit unknown; at
  5ca7a947 it only reads it, relying on DSA's rebuild);
* ``qsa_req_idx_per_token``: QSA (``.../sparse/qsa/``, read by
  ``QSAIndexer.update_cache_and_compress`` in a stored version of ``.../sparse/qsa/indexer.py``,
  commit unknown);
* the ragged-verification row maps (the newest stored version of
  ``tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py``, commit unknown):
  ``row_req_idx_cuda`` maps each verification row to its generation request
  (``_prepare_ragged_row_kv_lens``: request ``g`` repeated once per verification row it has) and
  ``attn_row_req_idx_cuda`` maps contexts and rows to their requests (the contexts first, in
  order, then the row map shifted past them; ``_prepare_token_major_gen_rows``). They describe the verify
  layout only, so they are judged where the generation ``seq_lens`` are ``ragged_verify_lens``.

The DSA-family classes of a tree are found by reading files (no import): every ``metadata.py``
under the era's ``sparse/`` directory defining a class that derives from
``DSAtrtllmAttentionMetadata`` or carries one of the maps above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.dsa.invariants import Violation, check_req_idx_map
from regress.dsa.mapping import expected_req_idx_per_token
from regress.tree.source import module_name

#: Per-token maps: buffer name -> what reads it.
TOKEN_MAPS = {
    "req_idx_per_token": "DSA top-k conversion and indexer-K slot mapping",
    "qsa_req_idx_per_token": "QSA side-cache update (QSAIndexer.update_cache_and_compress)",
}
#: Row maps of ragged verification: buffer name -> how a row maps to a request.
ROW_MAPS = ("row_req_idx_cuda", "attn_row_req_idx_cuda")
_CLASS = re.compile(r"^class\s+(\w+)\s*\(([^)]*)\)", re.MULTILINE)


def maps_of(md: Any) -> list[str]:
    """The map buffers this object carries (allocated, not None)."""
    names = [n for n in (*TOKEN_MAPS, *ROW_MAPS) if getattr(md, n, None) is not None]
    return names


def check_maps(md: Any) -> list[Violation]:
    """Every map of ``md`` agrees with its current layout (the row maps: when they describe it)."""
    out: list[Violation] = []
    for name in TOKEN_MAPS:
        buf = getattr(md, name, None)
        if buf is None:
            continue
        view = _TokenView(md, buf)
        for v in check_req_idx_map(view):
            out.append(_named(v, name))
    out += _check_rows(md)
    return out


class _TokenView:
    """``md`` as :func:`check_req_idx_map` reads it, with ``buf`` as ``req_idx_per_token``."""

    def __init__(self, md: Any, buf: Any) -> None:
        self.seq_lens = md.seq_lens
        self.seq_lens_cuda = getattr(md, "seq_lens_cuda", None)
        self.num_tokens = md.num_tokens
        self.req_idx_per_token = buf


def _named(v: Violation, name: str) -> Violation:
    if name == "req_idx_per_token":
        return v
    message = v.message.replace("req_idx_per_token", name)
    return Violation(v.check, message, {**v.details, "map": name})


def _check_rows(md: Any) -> list[Violation]:
    verify = getattr(md, "ragged_verify_lens", None)
    rows = int(getattr(md, "_ragged_num_rows", 0) or 0)
    if not verify or rows <= 0 or getattr(md, "seq_lens", None) is None:
        return []
    nc, ns = int(md.num_contexts), int(md.num_seqs)
    gen = [int(x) for x in md.seq_lens[nc:ns].tolist()]
    if gen != [int(x) for x in verify]:
        return []  # the rows describe the verify layout, not this one (a draft step)
    want = {
        "row_req_idx_cuda": expected_req_idx_per_token(gen)[:rows],
        "attn_row_req_idx_cuda": list(range(nc))
        + [r + nc for r in expected_req_idx_per_token(gen)],
    }
    out = []
    for name in ROW_MAPS:
        buf = getattr(md, name, None)
        if buf is None:
            continue
        expected = want[name]
        actual = [int(x) for x in buf[: len(expected)].tolist()]
        if actual != expected:
            first = next(
                i for i, (a, e) in enumerate(zip(actual, expected, strict=False)) if a != e
            )
            out.append(
                Violation(
                    "req_idx_map",
                    f"{name} is stale: row {first} maps to request {actual[first]}, but ragged "
                    f"verify lengths {gen} put it in request {expected[first]}",
                    {"map": name, "expected": expected, "actual": actual, "seq_lens": gen},
                )
            )
    return out


@dataclass(frozen=True)
class MetadataClass:
    """A DSA-family metadata class found in the tree's files."""

    name: str
    module: str
    file: Path
    maps: tuple[str, ...]


def dsa_family(package_dir: Path, sparse_dir: str, dsa_class: str) -> list[MetadataClass]:
    """Classes under ``sparse_dir`` that derive from ``dsa_class`` or carry a token map."""
    root = package_dir / sparse_dir
    found: list[MetadataClass] = []
    for file in sorted(root.glob("*/metadata.py")) + sorted(root.glob("*.py")):
        text = file.read_text(encoding="utf-8", errors="replace")
        maps = tuple(n for n in (*TOKEN_MAPS, *ROW_MAPS) if n in text)
        for name, bases in _CLASS.findall(text):
            if name == dsa_class or dsa_class in bases or ("Metadata" in name and maps):
                module = module_name(package_dir, file)
                found.append(MetadataClass(name, module, file, maps))
    return found


def load_class(up: Any, found: MetadataClass) -> type:
    """The class ``found`` names, its module executed from source (DSA's own is already loaded).

    Its sibling modules imported at module level run for real too (:func:`sibling_imports`).
    """
    if found.module == up.plan.dsa_module:
        return getattr(up.module, found.name)
    package = found.module.rsplit(".", 1)[0]
    up.sandbox.add_real([found.module, *(f"{package}.{s}" for s in sibling_imports(found.file))])
    return getattr(up.sandbox.load(found.module), found.name)


def sibling_imports(file: Path) -> list[str]:
    """Sibling modules ``file`` imports at module level (``from .params import ...``), if present.

    DeepSeek-V4's metadata checks its params' type and calls its indexer's ``prepare`` (both
    siblings); imports under ``TYPE_CHECKING`` or inside functions are indented and not taken.
    """
    names = re.findall(r"^from \.(\w+) import", file.read_text(encoding="utf-8"), re.MULTILINE)
    return [n for n in names if (file.parent / f"{n}.py").is_file()]
