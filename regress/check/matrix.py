"""The production matrix of ``regress check``: upstream's own switches as axes, cells of them.

A cell fixes one value per axis; ``str(cell)`` is the short stable string every finding carries
(``violation.details["cell"]``), e.g. ``fused=on,dsl=off,share=on,skip=on,sm=100,overlap=on,pad=on``.
Each axis is found in the tree by reading its source (text only, nothing executed): an axis the
tree does not have is ``n/a`` in every cell, never a gap. Each is set the way upstream sets it:

* ``fused``: the fused decode-metadata env gate the DSA module reads
  (``TRTLLM_FUSED_DSA_METADATA``, fusion only for ``"1"``:
  ``attention/backends/sparse/dsa/metadata.py`` @ 186080bb ``_fused_dsa_meta_enabled``;
  ``TRTLLM_DISABLE_FUSED_DSA_METADATA``, fusion unless ``"1"``: upstream's
  ``test_fused_metadata.py`` @ 5de04e21). ``on`` is upstream's newest default.
* ``dsl``, ``share``, ``skip``: the ``DSAMetadataParams`` fields ``use_cute_dsl_paged_mqa_logits``
  (the DSL expand path: ``on_update_kv_lens`` asks ``_pick_dsl_expand`` for a factor, > 1 on a
  small verify batch), ``mtp_index_share`` and ``enable_indexer_skip``
  (``sparse/dsa/params.py`` @ 4b1c788d; era B reads them off ``sparse_attention_config``).
* ``sm``: what ``tensorrt_llm._utils.get_sm_version`` answers (90 Hopper, 100 Blackwell).
* ``overlap``: the overlap scheduler's correction, replayed between forwards
  (:mod:`regress.check.overlap`); present where the metadata has ``on_update_kv_lens``, the hook
  ``pyexecutor/model_engine.py`` ``_preprocess_inputs`` calls after it.
* ``pad``: a CUDA-graph padded batch (dummy generation rows up to a capture size, as
  ``pyexecutor/cuda_graph_runner.py`` ``_get_padded_batch`` pads); present where the metadata
  takes ``is_cuda_graph``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from regress.sandbox.gates import FusedGate

from regress.errors import UsageError

#: The value of an axis the tree does not have.
NA = "n/a"
ON, OFF = "on", "off"


@dataclass(frozen=True)
class Axis:
    """One upstream switch.

    Attributes:
        key: the short name cells use (``fused``).
        values: the values a cell may take, in ``--matrix full`` order.
        switch: upstream's own name for it (an env var, a params field, a function).
        kind: how it is set: ``env``, ``param``, ``sm`` or ``replay`` (regress drives it).
    """

    key: str
    values: tuple[str, ...]
    switch: str
    kind: str


AXES: tuple[Axis, ...] = (
    Axis(
        "fused", (ON, OFF), "TRTLLM_FUSED_DSA_METADATA / TRTLLM_DISABLE_FUSED_DSA_METADATA", "env"
    ),
    Axis("dsl", (OFF, ON), "use_cute_dsl_paged_mqa_logits", "param"),
    Axis("share", (OFF, ON), "mtp_index_share", "param"),
    Axis("skip", (OFF, ON), "enable_indexer_skip", "param"),
    Axis("sm", ("90", "100"), "get_sm_version", "sm"),
    Axis("overlap", (OFF, ON), "on_update_kv_lens", "replay"),
    Axis("pad", (OFF, ON), "is_cuda_graph", "replay"),
)
_BY_KEY = {a.key: a for a in AXES}

#: The cell of the scenarios that run outside the matrix: every params switch at
#: :data:`regress.sandbox.eras.SPARSE_SETTINGS`, no replay; its ``sm`` is ``--sm``'s and its
#: ``fused`` the gate's value in that session (upstream's default for the tree unless set:
#: :func:`base_cell`).
BASE: dict[str, str] = {
    "fused": OFF,
    "dsl": OFF,
    "share": OFF,
    "skip": OFF,
    "overlap": OFF,
    "pad": OFF,
}

#: Upstream's production configurations of the DSA models it tests, on SM 90 and 100: GLM-5.2
#: with index share (``tests/integration/defs/accuracy/test_glm52.py`` @ 16d54ba2
#: ``test_mtp_index_share``: overlap scheduler on, ``CudaGraphConfig(enable_padding=True)``) and
#: DeepSeek-V3.2 without it (``test_llm_api_pytorch.py::TestDeepSeekV32`` @ 000b1b9b); fusion on
#: (the newest default); the indexer skip on (``DSAParams.skip_indexer_for_short_seqs`` defaults
#: True, ``sparse/dsa/params.py`` @ 4b1c788d); the DSL path off (``use_cute_dsl_paged_mqa_logits``
#: defaults False there).
PRODUCTION: tuple[dict[str, str], ...] = tuple(
    {"fused": ON, "dsl": OFF, "share": share, "skip": ON, "sm": sm, "overlap": ON, "pad": ON}
    for share in (ON, OFF)
    for sm in ("100", "90")
)
MATRICES = ("default", "full")


class MatrixError(UsageError):
    """An unknown ``--matrix`` cell, axis or value (exit 2)."""


@dataclass(frozen=True, order=True)
class Cell:
    """One value per axis, in :data:`AXES` order."""

    values: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values)

    def __getitem__(self, key: str) -> str:
        return dict(self.values)[key]

    def on(self, key: str) -> bool:
        return self[key] == ON


@dataclass(frozen=True)
class Found:
    """Where the tree has an axis: the switch's name as the tree spells it, and the file."""

    switch: str
    file: str


@dataclass
class TreeAxes:
    """The axes of one tree: each found (:class:`Found`) or absent (None: ``n/a``)."""

    found: dict[str, Found | None] = field(default_factory=dict)

    def has(self, key: str) -> bool:
        return self.found.get(key) is not None

    def cell(self, values: dict[str, str]) -> Cell:
        """The cell of ``values`` in this tree: an axis the tree lacks is ``n/a``."""
        return Cell(tuple((a.key, values[a.key] if self.has(a.key) else NA) for a in AXES))

    def describe(self) -> list[str]:
        return [
            f"{a.key}: {f.switch} ({f.file})" if (f := self.found.get(a.key)) else f"{a.key}: n/a"
            for a in AXES
        ]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def find_axes(tree: Any, fused_gates: Sequence[FusedGate]) -> TreeAxes:
    """Read the tree's source for each axis (``tree``: a resolved
    :class:`~regress.tree.source.SourceTree`).

    ``fused_gates``: the env gates the DSA module reads (:func:`regress.sandbox.eras.fused_gates`).
    """
    pkg = tree.package_dir
    dsa = tree.dsa_metadata.file
    backends = tree.trtllm_metadata.file.parent
    # the params dataclasses first: where a switch is declared is the place to cite
    files = [dsa.parent / "params.py", backends / "sparse" / "params.py", dsa]
    texts = {p: _read(p) for p in files if p.is_file()}
    bases = {p: _read(p) for p in (tree.attention_metadata.file, tree.trtllm_metadata.file)}

    def where(name: str, among: dict[Path, str]) -> Found | None:
        pattern = re.compile(rf"\b{re.escape(name)}\b")
        hit = next((p for p, t in among.items() if pattern.search(t)), None)
        return Found(name, str(hit.relative_to(pkg.parent))) if hit is not None else None

    rel = str(dsa.relative_to(pkg.parent))
    found: dict[str, Found | None] = {
        "fused": Found(fused_gates[0].name, rel) if fused_gates else None,
        "sm": where("get_sm_version", {**texts, **bases}),
        "overlap": where("on_update_kv_lens", texts),
        "pad": where("is_cuda_graph", {**texts, **bases}),
    }
    for key in ("dsl", "share", "skip"):
        found[key] = where(_BY_KEY[key].switch, texts)
    return TreeAxes(found)


def _parse_cell(spec: str, axes: TreeAxes) -> Cell:
    values = dict(PRODUCTION[0])
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in _BY_KEY:
            raise MatrixError(
                f"unknown --matrix axis {key!r} in {spec!r}: use default, full, or a cell of "
                f"axis=value pairs with the axes {', '.join(_BY_KEY)}"
            )
        allowed = _BY_KEY[key].values
        if value not in allowed:
            raise MatrixError(
                f"unknown --matrix value {value!r} for {key}: choose from {', '.join(allowed)}"
            )
        values[key] = value
    return axes.cell(values)


def check_spec(spec: str) -> None:
    """Refuse a bad ``--matrix`` before anything runs (the tree is not needed to judge it)."""
    if spec not in MATRICES:
        _parse_cell(spec, TreeAxes({a.key: Found(a.switch, "") for a in AXES}))


def cells(specs: Iterable[str], axes: TreeAxes) -> list[Cell]:
    """The cells ``--matrix`` asks for (``default``, ``full`` or ``axis=value,...``), deduplicated.

    An axis the tree lacks collapses to ``n/a``, so ``full`` on a tree without the DSL path runs
    half as many cells; a cell given with only some axes takes the first production cell's values
    for the rest.
    """
    out: dict[Cell, None] = {}
    for spec in specs:
        if spec == "default":
            batch = [axes.cell(v) for v in PRODUCTION]
        elif spec == "full":
            batch = [
                axes.cell(dict(zip(_BY_KEY, combo, strict=True)))
                for combo in itertools.product(*(a.values for a in AXES))
            ]
        else:
            batch = [_parse_cell(spec, axes)]
        out.update(dict.fromkeys(batch))
    return list(out)


def most_cells(specs: Iterable[str]) -> int:
    """At most how many cells ``--matrix specs`` runs on any tree (no tree needed: a tree lacking
    an axis runs fewer), for budgets set before the tree loads."""
    n = 0
    for spec in specs:
        n += {"default": len(PRODUCTION), "full": 2 ** len(AXES)}.get(spec, 1)
    return n


def base_cell(axes: TreeAxes, sm: int, fused: bool | None = None) -> Cell:
    """The cell the scenarios outside the matrix run in (:data:`BASE` at ``--sm``), with
    ``fused`` as the session ran it (None: the tree has no gate; :data:`BASE`'s value)."""
    chosen = {} if fused is None else {"fused": ON if fused else OFF}
    return axes.cell({**BASE, "sm": str(sm), **chosen})


@dataclass(frozen=True)
class CellSettings:
    """How one cell is set in the sandbox.

    Attributes:
        env: environment variables (the fused gate's value for ``on``/``off``).
        params: ``DSAMetadataParams`` fields.
        sm: the SM version ``get_sm_version`` answers, or None (the run's ``--sm``).
        overlap: replay the overlap correction between forwards.
        pad: pad the batch with CUDA-graph dummy rows.
        fused: the fused decode-metadata path is on (its kernel module runs from source).
    """

    env: dict[str, str]
    params: dict[str, Any]
    sm: int | None
    overlap: bool
    pad: bool
    fused: bool = False


def settings_for(cell: Cell, gates: Sequence[FusedGate]) -> CellSettings:
    """The env, params and SM that put the tree in ``cell`` (an ``n/a`` axis is left alone).

    Each gate is set to the value its own source says turns fusion on or off
    (:class:`~regress.sandbox.gates.FusedGate`, read from the tree's DSA module).
    """
    env: dict[str, str] = {}
    if cell["fused"] != NA:
        for gate in gates:
            env[gate.name] = gate.value(cell.on("fused"))
    params = {_BY_KEY[k].switch: cell.on(k) for k in ("dsl", "share", "skip") if cell[k] != NA}
    return CellSettings(
        env=env,
        params=params,
        sm=int(cell["sm"]) if cell["sm"] != NA else None,
        overlap=cell.on("overlap"),
        pad=cell.on("pad"),
        fused=cell.on("fused"),
    )


__all__ = [
    "AXES",
    "BASE",
    "MATRICES",
    "NA",
    "PRODUCTION",
    "Axis",
    "Cell",
    "CellSettings",
    "Found",
    "MatrixError",
    "TreeAxes",
    "base_cell",
    "cells",
    "check_spec",
    "find_axes",
    "most_cells",
    "settings_for",
]
