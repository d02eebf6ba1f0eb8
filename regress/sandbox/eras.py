"""What the sandbox supplies per tree: the stubs' answers, the environment, how metadata is built.

The era and what runs for real in it are the tree's (:mod:`regress.tree.eras`, resolved once by
:func:`regress.tree.source.resolve_source_tree`); this module adds only what the sandbox fakes.
The values were found by running the real files on a CPU: era B ``sparse/dsa/metadata.py`` @
e5c90626 (with ``indexer.py``, ``trtllm.py``, ``interface.py``), era A ``sparse/dsa.py`` @
00e3c1a5, era C ``attention/backends/sparse/dsa/metadata.py`` @ d3d4066f.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.sandbox import Ledger, SandboxGap
from regress.sandbox.fakes import (
    FakeKVCacheManager,
)
from regress.sandbox.gates import FusedGate, fused_gates
from regress.sandbox.shells import SessionEnv
from regress.sandbox.stubs import StubModule, is_placeholder
from regress.sandbox.values import cache_manager_values, stub_values
from regress.tree.eras import CALLER_FILES, OPTIONAL_REAL, RUNNER, dotted
from regress.tree.source import SourceTree

#: Values of sparse-attention settings the metadata reads (DeepSeek-V3.2 defaults).
SPARSE_SETTINGS: dict[str, Any] = {
    "index_topk": 2048,
    "index_n_heads": 64,
    "index_head_dim": 128,
    "indexer_max_chunk_size": 32768,
    "max_sparse_topk": 2048,
    "enable_indexer_skip": False,
    "skip_indexer_for_short_seqs": False,
    "enable_heuristic_topk": False,
    "q_split_threshold": 8192,
    "use_cute_dsl_topk": False,
    "use_cute_dsl_paged_mqa_logits": False,
    "indexer_rope_interleave": False,
}
#: Fields only a subclass's metadata params carry (``DeepSeekV4MetadataParams``,
#: ``.../sparse/deepseek_v4/params.py`` @ 50aec1cb): one compress ratio per layer of the fake
#: manager's two, a sliding-window layer and a sparse (ratio-4, indexed) one.
PARAMS_ONLY_SETTINGS: dict[str, Any] = {"compress_ratios": [1, 4]}


@dataclass
class Settings:
    """Knobs of one sandbox run.

    Attributes:
        sm: the SM version the code believes it runs on.
        num_sms: the SM count.
        fused: the fused decode-metadata gate (:meth:`EraPlan.session_env`): None is upstream's
            default for the tree, True / False force the fused kernel / the eager chain.
        device: where upstream's ``device="cuda"`` tensors live (:data:`regress.sandbox.cuda.DEVICES`):
            ``cpu`` maps them onto the CPU, ``cuda`` runs them natively on the GPU.
    """

    sm: int = 90
    num_sms: int = 132
    fused: bool | None = None
    device: str = "cpu"


@dataclass
class EraPlan:
    """What to execute for one resolved tree.

    Attributes:
        tree: the resolved tree (its era, module locations).
        real: dotted names executed from source.
        runner_module: the layer-wise runner module, or None when the tree has none.
    """

    tree: SourceTree
    real: tuple[str, ...]
    runner_module: str | None
    fused_gates: tuple[FusedGate, ...] = ()
    caller_modules: tuple[str, ...] = ()
    #: the tree's ``llm_args`` module (or why not) per kind of session, loaded once per run
    #: whatever the number of matrix cells (:func:`regress.sandbox.drafts.llm_args_module`)
    llm_args_loads: dict[tuple[Any, ...], tuple[Any, str]] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def checkout(self) -> Path:
        return self.tree.package_dir.parent

    @property
    def dsa_module(self) -> str:
        """The module defining ``DSAtrtllmAttentionMetadata`` (the tree's own location of it)."""
        return self.tree.dsa_metadata.module

    def session_env(self, fused: bool | None = None) -> SessionEnv:
        """The fused-metadata gates for one sandbox session: the one place they are set.

        ``fused`` None leaves every gate unset (an ambient value removed), so the tree decides
        as upstream does by default; True / False set each gate to the value that turns the
        fused kernel on / off.
        """
        values: dict[str, str | None] = {}
        why: dict[str, str] = {}
        for gate in self.fused_gates:
            if fused is None:
                values[gate.name] = None
                state = "on" if gate.default_on else "off"
                why[gate.name] = f"upstream's default for this tree, fused {state} ({gate.read})"
            else:
                values[gate.name] = gate.value(fused)
                why[gate.name] = f"fused decode metadata {'on' if fused else 'off'} ({gate.read})"
        return SessionEnv(values, why)

    @property
    def env(self) -> SessionEnv:
        """:meth:`session_env` at upstream's default."""
        return self.session_env(None)

    def fused_in(self, env: Any) -> bool | None:
        """Whether a session with ``env`` runs the fused kernel (None: the tree has no gate)."""
        if not self.fused_gates:
            return None
        return all(
            g.default_on if env.get(g.name) is None else env[g.name] == g.on_value
            for g in self.fused_gates
        )


def plan_for(tree: SourceTree) -> EraPlan:
    """The modules to execute for ``tree`` (its era's :attr:`~regress.tree.eras.Era.real`)."""
    era = tree.era
    real = [dotted(rel) for rel in era.files(era.real)]
    for rel in era.files(OPTIONAL_REAL):
        if (tree.package_dir / rel).is_file() and dotted(rel) not in real:
            real.insert(0, dotted(rel))
    runner = tree.package_dir / RUNNER
    gates = fused_gates(tree.dsa_metadata.file)
    callers = [dotted(f) for f in CALLER_FILES if (tree.package_dir / f).is_file()]
    return EraPlan(
        tree=tree,
        real=tuple(real),
        runner_module=dotted(RUNNER) if runner.is_file() else None,
        fused_gates=gates,
        caller_modules=tuple(callers),
    )


def all_values(plan: EraPlan, settings: Settings) -> dict[str, dict[str, tuple[Any, str]]]:
    values = stub_values(settings)
    dsa_dir = plan.dsa_module.rsplit(".", 1)[0]
    values.update(cache_manager_values(dsa_dir))
    return values


def _sparse_kwargs(
    cls: type, ledger: Ledger, dsa_module: types.ModuleType, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The sparse-settings constructor argument the era's metadata takes.

    Older era B (e5c90626) reads ``self.sparse_attention_config`` (a ``SparseAttentionConfig``);
    later era B and era C take ``sparse_metadata_params=DSAMetadataParams(...)`` from the real
    ``params.py`` and raise without it.
    """
    fields = getattr(cls, "__dataclass_fields__", {})
    init = inspect.signature(cls.__init__).parameters
    params_cls = getattr(dsa_module, "DSAMetadataParams", None)
    sibling = sys.modules.get(dsa_module.__name__.rsplit(".", 1)[0] + ".params")
    if params_cls is None and sibling is not None and not isinstance(sibling, StubModule):
        params_cls = getattr(sibling, "DSAMetadataParams", None)
    if is_placeholder(params_cls):
        params_cls = None  # a stub, not the real dataclass: this era does not take it
    params_cls = _most_derived(sys.modules.get(cls.__module__), params_cls)
    if params_cls is not None and (
        "sparse_metadata_params" in fields or "sparse_metadata_params" in init
    ):
        return {"sparse_metadata_params": build_params(params_cls, ledger, overrides)}
    config = types.SimpleNamespace(**{**SPARSE_SETTINGS, **(overrides or {})})
    if "sparse_attention_config" in fields or "sparse_attention_config" in init:
        ledger.note(
            "collaborator", "sparse_attention_config", "a namespace of DeepSeek-V3.2 settings"
        )
        return {"sparse_attention_config": config}
    # The metadata reads the attribute but this interface.py has no such field (version skew).
    cls.sparse_attention_config = config
    ledger.note(
        "shim",
        f"{cls.__name__}.sparse_attention_config",
        "class attribute: the metadata reads it but interface.py declares no such field",
    )
    return {}


def _most_derived(module: types.ModuleType | None, params_cls: type | None) -> type | None:
    """The subclass of ``params_cls`` a subclass's module uses, if any (DeepSeek-V4's
    ``__post_init__`` raises unless its params are a ``DeepSeekV4MetadataParams``)."""
    if module is None or params_cls is None:
        return params_cls
    found = params_cls
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and not is_placeholder(value)
            and issubclass(value, found)
            and dataclasses.is_dataclass(value)
        ):
            found = value
    return found


def build_params(params_cls: type, ledger: Ledger, overrides: dict[str, Any] | None = None) -> Any:
    """``DSAMetadataParams`` from its real dataclass, filling the fields regress knows.

    ``overrides``: a production-matrix cell's switches (:mod:`regress.check.matrix`), set only
    where the dataclass has the field.
    """
    if not dataclasses.is_dataclass(params_cls):
        raise SandboxGap(f"{params_cls.__qualname__} to be a dataclass (it is not)")
    kwargs = {}
    settings = {**SPARSE_SETTINGS, **PARAMS_ONLY_SETTINGS, **(overrides or {})}
    for f in dataclasses.fields(params_cls):
        if f.name in settings:
            kwargs[f.name] = settings[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise SandboxGap(
                f"a value for the required field {params_cls.__qualname__}.{f.name}",
                hint="Add it to regress.sandbox.eras.SPARSE_SETTINGS.",
            )
    ledger.note(
        "collaborator", params_cls.__qualname__, f"real dataclass, fields set: {sorted(kwargs)}"
    )
    return params_cls(**kwargs)


@dataclass
class Upstream:
    """The loaded real classes of one tree and how to construct its metadata.

    ``sandbox`` is the live :class:`~regress.sandbox.shells.Sandbox` (scenarios that load one
    more real module, like the layer-wise runner, go through it).
    """

    plan: EraPlan
    module: types.ModuleType
    metadata_cls: type
    kv_cache_params_cls: type
    ledger: Ledger
    sandbox: Any = None
    workers: Any = None  # regress.sandbox.workers.Catalog, loaded on first use
    #: a production-matrix cell's params switches (``build_params``'s ``overrides``)
    sparse_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: the production-matrix cell this sandbox was set up for (``regress.check.production``)
    matrix_cell: Any = None

    @property
    def fused(self) -> bool | None:
        """Whether this session runs the fused decode-metadata kernel (None: no gate)."""
        return self.plan.fused_in(self.sandbox.env) if self.sandbox is not None else None

    @contextlib.contextmanager
    def session(self, *, fused: bool | None) -> Iterator[Upstream]:
        """The tree loaded again in a session with the fused gate set (this one if it matches).

        Upstream reads its gate once per process (``_fused_dsa_meta_enabled`` is cached), so
        another value needs the modules executed afresh: a nested sandbox on the same ledger.
        """
        if fused is None or self.fused == fused or self.sandbox is None:
            yield self
            return
        from regress.sandbox.shells import Sandbox

        sb = self.sandbox
        env = self.plan.session_env(fused)
        with Sandbox(sb.checkout, sb.real, sb.values, env=env, ledger=self.ledger) as inner:
            yield load(inner, self.plan, self.ledger)

    def make_metadata(
        self,
        kv_cache_manager: FakeKVCacheManager,
        *,
        max_num_tokens: int,
        seq_lens: Any = None,
        num_contexts: int = 0,
        cached: list[int] | None = None,
        draft_kv_cache_manager: Any = None,
        metadata_cls: type | None = None,
        sparse_params: Any = None,
    ) -> Any:
        """A fresh metadata object, as ``model_engine`` builds it (``seq_lens`` may be None).

        ``draft_kv_cache_manager`` is a separate draft KV cache (a field of newer
        ``AttentionMetadata``); ``metadata_cls`` another metadata class of the tree: a DSA-family
        one gets the era's sparse settings (its own params subclass where it has one), the dense
        ``TrtllmAttentionMetadata`` the DSA class extends none; ``sparse_params`` replaces them
        (a scenario's own ``sparse_metadata_params``, DeepSeek-V4's compress ratios).
        """
        import torch

        n = kv_cache_manager.max_batch_size
        kwargs: dict[str, Any] = {
            "max_num_requests": n,
            "max_num_tokens": max_num_tokens,
            "max_num_sequences": n,
            "kv_cache_manager": kv_cache_manager,
            "seq_lens": None if seq_lens is None else torch.as_tensor(seq_lens, dtype=torch.int),
            "num_contexts": num_contexts,
        }
        if seq_lens is not None:
            kwargs.update(self.batch_kwargs(len(seq_lens), cached))
        if draft_kv_cache_manager is not None:
            kwargs["draft_kv_cache_manager"] = draft_kv_cache_manager
        cls = metadata_cls or self.metadata_cls
        if sparse_params is not None:
            kwargs["sparse_metadata_params"] = sparse_params
        elif issubclass(cls, self.metadata_cls):
            kwargs.update(self.sparse_kwargs(cls))
        return cls(**kwargs)

    def sparse_kwargs(self, cls: type | None = None) -> dict[str, Any]:
        """The era's sparse-settings constructor argument (see :func:`_sparse_kwargs`)."""
        cls = cls or self.metadata_cls
        module = sys.modules.get(cls.__module__)
        if getattr(module, "DSAMetadataParams", None) is None:  # a subclass defined elsewhere
            module = self.module
        return _sparse_kwargs(cls, self.ledger, module, self.sparse_overrides)

    def batch_kwargs(self, batch: int, cached: list[int] | None = None) -> dict[str, Any]:
        cached = list(cached) if cached is not None else [40 + 10 * i for i in range(batch)]
        return {
            "request_ids": list(range(batch)),
            "prompt_lens": list(cached),
            "kv_cache_params": self.kv_cache_params_cls(
                use_cache=True, num_cached_tokens_per_seq=cached, num_extra_kv_tokens=0
            ),
        }


def load(sandbox: Any, plan: EraPlan, ledger: Ledger) -> Upstream:
    """Execute the plan's real modules in ``sandbox`` and return the loaded tree."""
    for name in plan.real:
        sandbox.load(name)
    module = sandbox.load(plan.dsa_module)
    return Upstream(
        plan=plan,
        module=module,
        metadata_cls=module.DSAtrtllmAttentionMetadata,
        kv_cache_params_cls=sandbox.load("tensorrt_llm._torch.metadata").KVCacheParams,
        ledger=ledger,
        sandbox=sandbox,
    )
