"""Attach the DSA sentinel to every live TensorRT-LLM DSA metadata object, in every process."""

from __future__ import annotations

import atexit
import dataclasses
import functools
import importlib
import importlib.abc
import importlib.util
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.trtllm.import_hooks import when_imported
from regress.trtllm.sentinel_report import SentinelReport, read_report

# How it reaches the objects. TensorRT-LLM builds its attention metadata deep inside the executor
# (once per engine, again for each CUDA-graph batch size through ``copy.copy`` + ``__post_init__``)
# and, for TP > 1 and by default even for TP = 1, inside MPI worker processes spawned by
# ``MpiPoolSession``. So the hook (1) wraps the DSA metadata class's ``__post_init__`` (every
# construction and every CUDA-graph copy passes through it) to attach a sentinel to the new object;
# (2) installs lazily, when the DSA module is imported, so it never imports ``tensorrt_llm`` itself;
# (3) reaches the workers through an initializer added to the ``MPIPoolExecutor`` that
# ``tensorrt_llm.llmapi.mpi_session`` creates; (4) records what it attached and every violation as
# JSON lines under a sink directory, one file per process, read by the test after shutdown.
# Only the standard library is imported here, so running as a worker initializer cannot disturb
# the worker's CUDA or MPI state.

DEFAULT_SENTINEL = "regress.dsa.sentinel:Sentinel"
# CUDA-graph replays: the sentinel checks what it snapshotted during capture after each replay.
DEFAULT_REPLAY_HOOKS = (
    "regress.dsa.sentinel:install_replay_hook",
    "regress.dsa.sentinel:remove_replay_hook",
)
DEFAULT_CLASS = "DSAtrtllmAttentionMetadata"
_MARK = "_regress_sentinel"  # instance attribute: (owner id, names attach() added)
_CLASS_MARK = "_regress_sentinel_patch"  # class attribute: the undo function of the class patch
_ABSENT = object()


@dataclass(frozen=True)
class HookConfig:
    """What to hook and where to record; picklable, so it travels to MPI workers as-is.

    Attributes:
        sink_dir: directory receiving one ``<pid>.jsonl`` file per process.
        module_names: modules that define or re-export the DSA metadata class (see
            ``regress.tree.source.SourceTree.dsa_module_names``); the first one imported wins.
        class_name: the metadata class to hook.
        sentinel: ``"module:attr"`` of a zero-argument factory returning an object with
            ``attach(metadata)`` and a ``violations`` sequence.
        flush_methods: metadata methods after which new violations are written out, so a worker
            that dies without running ``atexit`` has still recorded what it saw: ``prepare``
            (once per forward) and ``on_update`` (which also closes every draft loop).
        replay_hooks: ``("module:install", "module:remove")``, zero-argument callables run once
            per process at the first attachment and at uninstall, or None. The default makes
            every ``torch.cuda.CUDAGraph.replay`` (TensorRT-LLM's CUDA-graph runner replays
            through it) check the snapshots the sentinel took while the graph was captured.
    """

    sink_dir: str
    module_names: tuple[str, ...]
    class_name: str = DEFAULT_CLASS
    sentinel: str = DEFAULT_SENTINEL
    flush_methods: tuple[str, ...] = ("prepare", "on_update")
    replay_hooks: tuple[str, str] | None = DEFAULT_REPLAY_HOOKS


def resolve_factory(spec: str) -> Callable[[], Any]:
    """Import ``"package.module:attr"`` and return the attribute."""
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"sentinel factory must look like 'module:attr', got {spec!r}")
    return getattr(importlib.import_module(module_name), attr)


def _as_record(violation: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(violation) and not isinstance(violation, type):
        return dataclasses.asdict(violation)
    if isinstance(violation, dict):
        return dict(violation)
    return {"message": str(violation)}


class Recorder:
    """Attaches one sentinel per metadata object and appends records to this process's file."""

    def __init__(self, config: HookConfig, factory: Callable[[], Any] | None = None) -> None:
        self.config = config
        self._factory = factory
        self._sentinels: list[Any] = []
        self._written: dict[int, int] = {}  # sentinel index -> violations already written
        self._lock = threading.Lock()
        self._replay_hooked = False
        self.path = Path(config.sink_dir) / f"{os.getpid()}.jsonl"

    def _write(self, records: Iterable[dict[str, Any]]) -> None:
        lines = [json.dumps(r, default=repr, sort_keys=True) + "\n" for r in records]
        if not lines:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.writelines(lines)
            handle.flush()

    def error(self, where: str, exc: BaseException) -> None:
        """Record a hook failure; a test treats it as a failed check, never as silence."""
        self._write([{"event": "error", "pid": os.getpid(), "where": where, "error": repr(exc)}])

    def on_instance(self, metadata: Any) -> None:
        """Attach a fresh sentinel, stripping wrappers a ``copy.copy`` brought from the original."""
        state = getattr(metadata, "__dict__", None)
        mark = state.get(_MARK) if state is not None else None
        if mark is not None and mark[0] == id(metadata):
            return  # __post_init__ ran twice on one object (subclass chains): attached already
        if mark is not None:
            for name in mark[1]:
                state.pop(name, None)  # bound to the original object, not to this copy
        before = set(state) if state is not None else set()
        try:
            if self._factory is None:
                self._factory = resolve_factory(self.config.sentinel)
            if self.config.replay_hooks is not None and not self._replay_hooked:
                resolve_factory(self.config.replay_hooks[0])()
                self._replay_hooked = True
            sentinel = self._factory()
            sentinel.attach(metadata)
        except Exception as exc:
            self.error(f"attach to {type(metadata).__qualname__}", exc)
            return
        if state is not None:
            self._flush_after(metadata, state)
        if state is not None:
            added = tuple(sorted(set(state) - before - {_MARK}))
            state[_MARK] = (id(metadata), added)
        with self._lock:
            self._sentinels.append(sentinel)
        self._write(
            [
                {
                    "event": "attached",
                    "pid": os.getpid(),
                    "class": f"{type(metadata).__module__}.{type(metadata).__qualname__}",
                    "copy": mark is not None,
                }
            ]
        )

    def _flush_after(self, metadata: Any, state: dict[str, Any]) -> None:
        """Wrap the flush methods on the instance, outside the sentinel's own wrappers.

        Outside is what matters: the sentinel records a violation after the original method
        returns, so a flush placed inside (on the class) would only see it one call later.
        """
        for name in self.config.flush_methods:
            method = getattr(metadata, name, None)
            if not callable(method):
                continue

            def flushing(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
                result = _method(*args, **kwargs)
                self.flush()
                return result

            state[name] = flushing

    def flush(self, *, final: bool = False) -> None:
        """Write violations not yet written (cheap when there are none).

        Args:
            final: the run is over: first let each sentinel run the checks it still owes
                (``Sentinel.flush()``, e.g. captured snapshots never followed by a replay).
        """
        records = []
        with self._lock:
            for index, sentinel in enumerate(self._sentinels):
                owed = getattr(sentinel, "flush", None) if final else None
                if callable(owed):
                    try:
                        owed()
                    except Exception as exc:  # report, keep writing what was found
                        records.append(
                            {
                                "event": "error",
                                "pid": os.getpid(),
                                "where": "flush",
                                "error": repr(exc),
                            }
                        )
                violations = list(getattr(sentinel, "violations", ()) or ())
                done = self._written.get(index, 0)
                for violation in violations[done:]:
                    records.append(
                        {"event": "violation", "pid": os.getpid(), **_as_record(violation)}
                    )
                self._written[index] = len(violations)
        self._write(records)

    def final_flush(self) -> None:
        """``flush(final=True)``, as a plain callable for ``atexit``."""
        self.flush(final=True)

    def remove_replay_hook(self) -> None:
        """Undo the replay hook this recorder installed, if it did."""
        if self._replay_hooked and self.config.replay_hooks is not None:
            try:
                resolve_factory(self.config.replay_hooks[1])()
            except Exception as exc:
                self.error("remove_replay_hook", exc)
            self._replay_hooked = False

    @property
    def violations(self) -> list[Any]:
        return [v for s in self._sentinels for v in (getattr(s, "violations", ()) or ())]

    @property
    def attached(self) -> int:
        return len(self._sentinels)


def patch_class(cls: type, recorder: Recorder) -> Callable[[], None]:
    """Wrap ``cls.__post_init__`` (or ``__init__``) to attach to every new object; return the undo.

    Only ``cls`` itself is changed (its own ``__dict__``), so base classes and sibling backends are
    untouched, while subclasses that chain to ``super().__post_init__()`` are covered. Patching a
    class twice is a no-op that returns the first undo.
    """
    if _CLASS_MARK in cls.__dict__:
        return cls.__dict__[_CLASS_MARK]
    init_name = "__post_init__" if hasattr(cls, "__post_init__") else "__init__"
    saved: dict[str, Any] = {}

    def wrap(name: str, after: Callable[[Any], None]) -> None:
        original = getattr(cls, name)
        saved[name] = cls.__dict__.get(name, _ABSENT)

        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            after(self)
            return result

        setattr(cls, name, wrapper)

    wrap(init_name, recorder.on_instance)

    def undo() -> None:
        if _CLASS_MARK not in cls.__dict__:
            return  # undone already (a re-exporting package and its module share the patch)
        for name, value in saved.items():
            if value is _ABSENT:
                delattr(cls, name)
            else:
                setattr(cls, name, value)
        delattr(cls, _CLASS_MARK)

    setattr(cls, _CLASS_MARK, undo)
    return undo


@dataclass
class Installation:
    """The hook installed in this process: its recorder and how to take it out again."""

    recorder: Recorder
    undos: list[Callable[[], None]] = field(default_factory=list)

    def uninstall(self) -> None:
        self.recorder.flush(final=True)
        atexit.unregister(self.recorder.final_flush)
        for undo in reversed(self.undos):
            undo()
        self.undos.clear()
        self.recorder.remove_replay_hook()


def install(config: HookConfig, factory: Callable[[], Any] | None = None) -> Installation:
    """Install the hook in the current process; it takes effect when the DSA module is imported."""
    recorder = Recorder(config, factory)
    installation = Installation(recorder)

    def on_module(module: Any) -> None:
        cls = getattr(module, config.class_name, None)
        if isinstance(cls, type) and _CLASS_MARK not in cls.__dict__:
            installation.undos.append(patch_class(cls, recorder))

    installation.undos.append(when_imported(config.module_names, on_module))
    atexit.register(recorder.final_flush)
    return installation


def install_in_worker(config: HookConfig, chained: Any = None, chained_args: tuple = ()) -> None:
    """``MPIPoolExecutor`` initializer: install the hook, then run any initializer it replaced."""
    try:
        install(config)
    except Exception as exc:  # record, never break the worker
        Recorder(config).error("install_in_worker", exc)
    if chained is not None:
        chained(*chained_args)


def patch_mpi_pool(mpi_session_module: Any, config: HookConfig) -> Callable[[], None]:
    """Make every ``MPIPoolExecutor`` created by ``mpi_session_module`` run ``install_in_worker``.

    ``tensorrt_llm.llmapi.mpi_session`` builds its pool with ``MPIPoolExecutor(max_workers=...,
    path=sys.path, ...)`` (and, in newer releases, a filtered ``env``); replacing the name in that
    module adds an initializer without re-implementing ``_start_mpi_pool``, whatever arguments a
    given release passes. An initializer it already had still runs, after ours. Checked:
    ``llmapi/mpi_session.py`` @ 00a1352a imports ``MPIPoolExecutor`` at module level and
    ``MpiPoolSession._start_mpi_pool`` calls it with ``max_workers``, ``path=sys.path``, ``env``.
    """
    real = getattr(mpi_session_module, "MPIPoolExecutor", None)
    if real is None:  # built without mpi4py: no worker processes to reach
        return lambda: None

    def executor(*args: Any, **kwargs: Any) -> Any:
        chained = kwargs.pop("initializer", None)
        chained_args = tuple(kwargs.pop("initargs", ()))
        kwargs["initializer"] = install_in_worker
        kwargs["initargs"] = (config, chained, chained_args)
        return real(*args, **kwargs)

    mpi_session_module.MPIPoolExecutor = executor

    def undo() -> None:
        mpi_session_module.MPIPoolExecutor = real

    return undo


@contextmanager
def sentinel_session(
    config: HookConfig,
    *,
    mpi_session_module: Any = None,
    factory: Callable[[], Any] | None = None,
) -> Iterator[Installation]:
    """Hook this process and, when given, the MPI workers; undo both on exit.

    Args:
        config: what to hook and where to record.
        mpi_session_module: ``tensorrt_llm.llmapi.mpi_session`` (passed in so that this module
            never imports TensorRT-LLM; unit tests pass a fake), or None for in-process only.
        factory: sentinel factory for this process (workers always use ``config.sentinel``).
    """
    installation = install(config, factory)
    if mpi_session_module is not None:
        installation.undos.append(patch_mpi_pool(mpi_session_module, config))
    try:
        yield installation
    finally:
        installation.uninstall()


__all__ = [
    "HookConfig",
    "Installation",
    "Recorder",
    "SentinelReport",
    "install",
    "install_in_worker",
    "patch_class",
    "patch_mpi_pool",
    "read_report",
    "resolve_factory",
    "sentinel_session",
    "when_imported",
]
