"""Every scenario of ``regress check``, listed once as a record.

The CLI's ``--scenario`` help and choices (:func:`scenario_help`, :func:`scenario_names`), the run
order and default set of :func:`regress.check.check.run_check` and the markdown summary's "upstream
callers replayed" (:mod:`regress.check.summary`) are all made from :data:`SCENARIOS`, so a scenario
added here is offered, run and described everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from regress.check.draft_scenarios import (
    draft_callers,
    draft_kv_cache,
    every_metadata_class,
    fused_metadata,
    ragged_verify,
)
from regress.check.failures import draft_failure
from regress.check.llm_configs import llm_configs
from regress.check.production import MATRIX, run_cell
from regress.check.results import ScenarioResult
from regress.check.scenarios import (
    map_after_draft_loop,
    runner_guard,
    sentinel_lifecycle,
    shape_announcement,
)
from regress.check.stale_state import stale_state
from regress.sandbox.eras import Upstream


@dataclass(frozen=True)
class Scenario:
    """One scenario of ``regress check``, listed once: the CLI's ``--scenario`` help and choices
    and the markdown summary's "upstream callers replayed" are made from these records.

    Attributes:
        name: what ``--scenario`` and the JSON call it (results are named ``name`` or
            ``name/case``).
        run: the scenario, given the loaded tree.
        help: what it checks, for ``regress check --help``.
        caller: the upstream caller whose calls it replays, for the summary.
        opt_in: run only when named (see :data:`SCENARIOS`).
        per_cell: run once per production-matrix cell (``--matrix``), each in a sandbox set up
            for the cell (:func:`regress.check.production.run_cells`); the others run once, in the
            base cell.
    """

    name: str
    run: Callable[[Upstream], list[ScenarioResult]]
    help: str
    caller: str
    opt_in: bool = False
    per_cell: bool = False


#: Every scenario, in the order ``regress check`` runs them. ``stale_state`` is opt-in: it still
#: reports a candidate upstream defect on current trees (``docs/findings.md``), which would turn
#: every check, and so every source bisect, into a failure.
SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "req_idx_map",
        map_after_draft_loop,
        "the token maps after the draft loop",
        "the tree's own one-model worker where it has one (each result names it), "
        "else regress's model of the MTP-Eagle draft loop",
    ),
    Scenario(
        "shape_announcement",
        shape_announcement,
        "the MTP widths announced before prepare()",
        "the executor's `update_spec_dec_param()` before `prepare()`",
    ),
    Scenario(
        "runner_guard",
        runner_guard,
        "the layer-wise runner's announced width",
        "`tools/layer_wise_benchmarks/runner.py` `Runner.create_run_pack('GEN')`",
    ),
    Scenario(
        "sentinel_lifecycle",
        sentinel_lifecycle,
        "the runtime sentinel over two forwards",
        "two executor forwards and a draft loop, with the runtime sentinel",
    ),
    Scenario(
        "draft_callers",
        draft_callers,
        "every one-model worker's draft loop",
        "every one-model worker of the tree (`speculative/*.py`), its own draft loop",
    ),
    Scenario(
        "metadata_classes",
        every_metadata_class,
        "every DSA-family metadata class",
        "every DSA-family metadata class of the tree, each map it carries",
    ),
    Scenario(
        "fused_metadata",
        fused_metadata,
        "the fused decode-metadata kernel, run for real",
        "the fused decode-metadata kernel with the tree's gate on (Triton, run for real)",
    ),
    Scenario(
        "draft_kv_cache",
        draft_kv_cache,
        "the switch to a separate draft KV cache",
        "the worker's switch to a separate draft KV cache",
    ),
    Scenario(
        "ragged_verify",
        ragged_verify,
        "per-request verification windows",
        "per-request verification windows and their row maps",
    ),
    Scenario(
        "draft_failure",
        draft_failure,
        "a draft step that raises, and what the worker leaves behind",
        "the tree's own one-model worker with a draft model that raises in step 0 and step 1, "
        "then the next forward",
    ),
    Scenario(
        "llm_configs",
        llm_configs,
        "every LLM configuration the GPU integration tests build, against the tree's llm_args.py",
        "`tensorrt_llm/llmapi/llm.py` `LLM(...)`: `TorchLlmArgs.from_kwargs` with the config "
        "objects each case of `tests/integration` passes",
    ),
    Scenario(
        MATRIX,
        run_cell,
        "upstream's production configurations, one cell each (--matrix)",
        "per cell: a verify forward (CUDA-graph padded), the worker's draft loop, the next "
        "forward (overlap-corrected on the device) against a fresh prepare(), its draft loop",
        per_cell=True,
    ),
    Scenario(
        "stale_state",
        stale_state,
        "the stale-state oracle",
        "two forwards and their draft loops, every checkpoint compared with a "
        "metadata object prepared from scratch",
        opt_in=True,
    ),
)


def scenario_names() -> list[str]:
    """Every scenario ``--scenario`` accepts, in run order."""
    return [s.name for s in SCENARIOS]


def by_name() -> dict[str, Scenario]:
    return {s.name: s for s in SCENARIOS}


def scenario_help() -> str:
    """The ``--scenario`` help of ``regress check``."""
    default = ", ".join(s.name for s in SCENARIOS if not s.opt_in)
    opt_in = ", ".join(f"{s.name} ({s.help})" for s in SCENARIOS if s.opt_in)
    return f"Run only this scenario (repeatable): {default}; {opt_in} runs only when named."
