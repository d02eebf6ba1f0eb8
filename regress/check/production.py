"""The ``matrix`` scenario: the tree's metadata in each production cell (:mod:`regress.check.matrix`).

Each cell runs in a sandbox of its own (the fused gate is read once per process upstream,
``_fused_dsa_meta_enabled`` is cached, so a cell never reuses another's loaded modules), with
the cell's env gate, params switches and SM. In it, two verify forwards of the same requests
(padded with CUDA-graph dummy rows when ``pad=on``), each followed by upstream's own draft loop
(:func:`regress.check.caller.caller_checkpoints`):

1. forward 1: ``update_spec_dec_param`` then ``prepare()``; the maps judged, then every
   checkpoint of the draft loop (:func:`regress.check.steps.judge`);
2. forward 2: with ``overlap=on`` the host prepares it assuming every draft accepted and the
   device correction follows (:mod:`regress.check.overlap`); else it is prepared with the true
   lengths. There the stale-state oracle compares the live object with a fresh one prepared for
   the true batch (:func:`regress.dsa.stale_check.check_states`, the allow table of the cell),
   and the maps are judged; then its draft loop, judged likewise.

Every violation names its cell (``details["cell"]``). A cell whose fused path needs Triton where
none is installed is a gap naming ``pip install triton``, never a pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from regress.check.caller import DraftSettings
from regress.check.differential import fused_vs_eager
from regress.check.matrix import Cell, CellSettings, settings_for
from regress.check.overlap import capture_size, correct, following, host_assumed, offsets, padded
from regress.check.results import ScenarioResult, stale_message
from regress.check.status import ScenarioStatus
from regress.check.steps import drive, observe, tree_prepare
from regress.dsa.announce import announce_speculation
from regress.dsa.batch import Batch
from regress.dsa.fresh import Blueprint
from regress.dsa.invariants import Violation
from regress.dsa.stale_check import Checkpoint, check_states
from regress.sandbox.fakes import FakeKVCacheManager
from regress.sandbox.packages import installed

#: The scenario's name (``--scenario matrix``); its results are ``matrix/<cell>``.
MATRIX = "matrix"
#: K, and the verify batch: full, zero and partial acceptance across four requests.
DRAFT_LEN = 3
VERIFY = Batch(
    seq_lens=(4, 4, 4, 4),
    cached=(40, 50, 60, 70),
    num_accepted=(4, 1, 2, 3),
    request_ids=(0, 1, 2, 3),
    max_draft_len=DRAFT_LEN,
    name="verify_4x4",
)
#: Sequence capacity: the padded batch's size; the dummy is its last slot's request.
CAPACITY = capture_size(VERIFY.batch_size + 1)
DUMMY_ID = CAPACITY - 1
#: The check of a difference an allow row explains in other cells only: not yet reviewed here.
UNREVIEWED = "unreviewed"
_FUSED_DEF = re.compile(r"^def fused_\w*decode\w*\(", re.M)
_TRITON_IMPORT = re.compile(r"^\s*(import triton|from triton\b)", re.M)


@dataclass(frozen=True)
class KernelFiles:
    """The fused path's files beside the DSA module, read once per check (every cell asks).

    Attributes:
        fused: modules defining a fused decode-metadata kernel (``def fused_dsa_decode_metadata``:
            ``sparse/dsa/fused_metadata.py`` @ e9eacd32, later ``kernels.py`` @ 25dc9ac1),
            executed from source in a ``fused=on`` cell, never stubbed.
        triton: the file names among them importing triton.
        absent: why the fused path cannot run in this tree ('' when it can): the DSA module
            imports its kernel from a module the tree lacks (:func:`_absent_kernel`).
    """

    fused: tuple[str, ...]
    triton: tuple[str, ...]
    absent: str = ""


def kernel_files(plan: Any) -> KernelFiles:
    """Read the DSA module's folder once for :class:`KernelFiles`."""
    dsa_dir = plan.tree.dsa_metadata.file.parent
    package = plan.dsa_module.rsplit(".", 1)[0]
    fused, triton = [], []
    for p in sorted(dsa_dir.glob("*.py")):
        text = p.read_text(errors="replace")
        if _FUSED_DEF.search(text):
            fused.append(f"{package}.{p.stem}")
        if _TRITON_IMPORT.search(text):
            triton.append(p.name)
    return KernelFiles(tuple(fused), tuple(triton), _absent_kernel(plan))


def _absent_kernel(plan: Any) -> str:
    """Why the fused path cannot run ('' when it can): the DSA module imports its kernel from a
    module the tree lacks (a partial tree, not a checkout; :func:`regress.sandbox.gates.kernel_imports`,
    which parses the whole DSA module: once per check, not per cell)."""
    from regress.sandbox.gates import kernel_imports

    dsa = plan.tree.dsa_metadata.file
    root = plan.tree.package_dir.parent
    for imp in kernel_imports(dsa):
        if imp.file.is_file() or (imp.file.with_suffix("") / "__init__.py").is_file():
            continue
        return (
            f"the fused decode-metadata path calls {', '.join(imp.names)} "
            f"({dsa.relative_to(root)}:{imp.line} imports it), and this tree has no "
            f"{imp.file.relative_to(root)}: not a complete checkout. Add that file of the same "
            "commit (upstream later moved the kernel to sparse/dsa/kernels.py @ 25dc9ac1)"
        )
    return ""


def kernel_missing(kernels: KernelFiles, cell: Cell | None = None) -> str:
    """:attr:`KernelFiles.absent` for a ``fused=on`` cell (or the fused scenario, ``cell`` None),
    asked before it runs: one gap naming the file to add, not a call of a stub deep inside
    ``on_update_kv_lens()``."""
    if not kernels.absent or (cell is not None and not cell.on("fused")):
        return ""
    return f"cell {cell}: {kernels.absent}" if cell is not None else kernels.absent


def fused_modules(plan: Any) -> list[str]:
    """The modules beside the DSA module defining a fused decode-metadata kernel
    (:attr:`KernelFiles.fused`)."""
    return list(kernel_files(plan).fused)


def triton_missing(kernels: KernelFiles, cell: Cell) -> str:
    """Why ``cell`` cannot run here ('' when it can): its fused path imports Triton, absent."""
    if not cell.on("fused") or not kernels.triton or installed("triton"):
        return ""
    return (
        f"cell {cell}: the fused decode-metadata path runs upstream's Triton kernel "
        f"({', '.join(kernels.triton)} imports triton), which is not installed: pip install triton"
    )


def _tag(found: list[Violation], cell: Cell) -> list[Violation]:
    return [Violation(v.check, v.message, {**v.details, "cell": str(cell)}) for v in found]


def run_cell(up: Any) -> list[ScenarioResult]:
    """The battery of the module docstring on the loaded tree ``up``, set up for its cell
    (``up.matrix_cell``: the :class:`Cell` and its :class:`CellSettings`)."""
    cell, cfg = up.matrix_cell
    result = ScenarioResult(f"{MATRIX}/{cell}")
    first = padded(VERIFY, CAPACITY, DUMMY_ID) if cfg.pad else VERIFY
    dummy = DUMMY_ID if cfg.pad else None
    kvm = FakeKVCacheManager(CAPACITY)
    k = DRAFT_LEN

    def make() -> Any:
        md = up.make_metadata(kvm, max_num_tokens=CAPACITY * (k + 1) * 2, seq_lens=None)
        announce_speculation(md, first.batch_size, k)
        return md

    blueprint = Blueprint(make, tree_prepare(up))
    live = blueprint.make()
    blueprint.prepare(live, first)
    result.add(_tag(observe(live, "f1:prepare", result, pages=kvm), cell), "f1:prepare")
    gates = up.plan.fused_gates if cfg.fused else ()
    drive(up, live, kvm, DraftSettings(k, first.accepted()), result, fused_gates=gates)
    second = following(first, dummy)
    announce_speculation(live, second.batch_size, k)
    if cfg.overlap:
        host = host_assumed(second, first, dummy)
        blueprint.prepare(live, host)
        correct(live, offsets(host, second))
        label = "f2:overlap_correction"
    else:
        blueprint.prepare(live, second)
        label = "f2:prepare"
    _oracle(live, blueprint, label, cell, result)
    result.add(_tag(observe(live, label, result, pages=kvm), cell), label)
    if cfg.overlap:  # the correction ran on_update_kv_lens(): the kernel, when fused
        result.add(fused_vs_eager(live, gates, label), label)
    drive(up, live, kvm, DraftSettings(k, second.accepted()), result, fused_gates=gates)
    result.violations = _tag(result.violations, cell)
    result.note = (
        f"{first.describe()}{' (CUDA-graph padded)' if cfg.pad else ''}; forward 2 "
        f"{'corrected on the device (overlap scheduler)' if cfg.overlap else 'prepared'}; "
        f"{result.note}"
    )
    return [result]


def _oracle(
    live: Any, blueprint: Blueprint, label: str, cell: Cell, result: ScenarioResult
) -> None:
    """The stale-state oracle at ``label``: live against a fresh prepare of the true batch."""
    from regress.dsa.stale_allow import ALLOWED

    [found] = check_states(
        live, blueprint, [Checkpoint(label)], draft_len=DRAFT_LEN, allow=ALLOWED, cell=str(cell)
    )
    for f in found.unexplained:
        rows = [a for a in ALLOWED if a.covers(f, f.owner)]
        check, why = "stale_state", ""
        if rows:  # explained elsewhere, but never reviewed for this cell
            check = UNREVIEWED
            why = f"; the allow row for it was decided in {', '.join(rows[0].cells)}, not this cell"
        message = stale_message(f, label) + why
        result.add([Violation(check, message, {**f.to_dict(), "cell": str(cell)})], label)


@contextmanager
def cell_sandbox(
    plan: Any, cfg: CellSettings, settings: Any, ledger: Any, kernels: KernelFiles | None = None
) -> Iterator[Any]:
    """A fresh sandbox for one cell: the plan's env with the cell's gate, the cell's SM
    (``kernels``: the plan's :func:`kernel_files`, read here when not given)."""
    import dataclasses

    from regress.sandbox.eras import all_values
    from regress.sandbox.shells import Sandbox, SessionEnv

    cell_settings = dataclasses.replace(settings, sm=cfg.sm or settings.sm)
    base = plan.env  # the one place the gates are set for a session (upstream's default)
    why = {
        name: f"the matrix cell's fused axis sets it to {value}" for name, value in cfg.env.items()
    }
    env = SessionEnv({**base, **cfg.env}, {**base.why, **why})
    if cfg.fused:
        fused = (kernels or kernel_files(plan)).fused
        real = list(dict.fromkeys([*fused, *plan.real]))
    else:
        real = plan.real
    with Sandbox(
        plan.checkout,
        real,
        all_values(plan, cell_settings),
        env=env,
        ledger=ledger,
        device=cell_settings.device,
    ) as sandbox:
        yield sandbox


def run_cells(
    plan: Any,
    cells: Sequence[Cell],
    scenarios: Sequence[Any],
    settings: Any,
    ledger: Any,
    *,
    load: Callable[[Any, Any, Any], Any],
    run: Callable[[Any, Any], list[ScenarioResult]],
) -> list[ScenarioResult]:
    """The per-cell ``scenarios`` (catalog records) in every cell, each cell in its own sandbox.

    ``load`` loads the tree in a sandbox (``regress.check.check``'s), ``run`` turns a scenario's
    exception into a gap or a verdict as for every scenario (``regress.check.check._run``). A
    result that names no cell is renamed ``<scenario>/<cell>``; every violation carries the cell.
    """
    from regress.sandbox import SandboxGap
    from regress.sandbox.blame import blame, describe

    out: list[ScenarioResult] = []
    kernels = kernel_files(plan)
    for cell in cells:
        cfg = settings_for(cell, plan.fused_gates)
        results: list[ScenarioResult] = []
        missing = kernel_missing(kernels, cell) or triton_missing(kernels, cell)
        try:
            if missing:
                raise SandboxGap(missing)
            with cell_sandbox(plan, cfg, settings, ledger, kernels) as sandbox:
                up = load(sandbox, plan, ledger)
                up.sparse_overrides = dict(cfg.params)
                up.matrix_cell = (cell, cfg)
                for scenario in scenarios:
                    results += run(scenario, up)
        except SandboxGap as exc:
            note = missing or str(exc)
            results = [ScenarioResult(s.name, ScenarioStatus.GAP, note=note) for s in scenarios]
        except Exception as exc:  # the tree does not load in this cell
            note = describe(exc, blame(exc, plan.checkout))
            results = [ScenarioResult(s.name, ScenarioStatus.GAP, note=note) for s in scenarios]
        for r in results:
            if "/" not in r.name:
                r.name = f"{r.name}/{cell}"
            r.violations = _tag(r.violations, cell)
        out += results
    ledger.real_modules[:] = list(dict.fromkeys(ledger.real_modules))  # each cell loads them again
    return out


__all__ = [
    "CAPACITY",
    "DRAFT_LEN",
    "MATRIX",
    "VERIFY",
    "cell_sandbox",
    "kernel_missing",
    "run_cell",
    "run_cells",
]
