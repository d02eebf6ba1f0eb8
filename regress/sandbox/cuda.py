"""CUDA on a CPU: device ``cuda`` allocations land on the CPU, host/device twins stay distinct.

Upstream DSA metadata keeps a pinned host buffer and a device buffer for most fields and copies
one into the other (``host_x`` -> ``x``). On a CPU the cheap mapping (``.cuda()`` returns the same
tensor) would alias the twins, so a missing host-to-device copy, which is a real bug on a GPU,
would go unnoticed. Here ``.cuda()`` and ``.to("cuda")`` always copy, ``pin_memory`` is dropped,
and ``torch.cuda.is_current_stream_capturing()`` (which raises on a CPU build) is False.

CUDA APIs with no CPU meaning are faked too, since on a CPU build of torch they raise (a dummy
``torch.cuda.Event`` cannot even be instantiated) and the error would read as the tree's: events
(``torch.cuda.Event``, recorded and queried, always complete), streams (``torch.cuda.Stream``,
``current_stream``, ``default_stream``, the ``torch.cuda.stream`` context), ``synchronize`` and
``Tensor.record_stream``. On a CPU every operation completes before the next starts, so ordering
through them is trivially satisfied; what they would order on a GPU is not checked here. Upstream
ends DSA ``prepare()`` with ``torch.cuda.Event().record()`` (the host-stage ring of
``_record_prepare_host_stage_slot`` in the newest stored version of
``tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py``, commit unknown). Every
interception is counted in the :class:`~regress.sandbox.Ledger`.

The function mode that rewrites placement is per thread in torch: code run in another thread
(the upstream worker a :mod:`regress.check.caller` run drives) enters :func:`device_mode`.

On a machine with a GPU, ``regress check --device cuda`` runs upstream natively instead
(:func:`native_cuda`): nothing is rewritten or faked, ``device="cuda"`` tensors live on the GPU,
host/device twins are distinct as on a real machine, and events and streams are torch's own. The
ledger names the GPU, so a report says where its verdicts were reached.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from regress.sandbox import Ledger

#: Where a sandbox session places upstream's ``device="cuda"`` tensors (``--device``).
DEVICES = ("cpu", "cuda")
#: Native sessions entered in this process: :func:`device_mode` then rewrites nothing.
_native_sessions = 0


def require_device(device: str) -> None:
    """Refuse a device this machine cannot run on, before any tree code runs.

    Raises:
        UsageError: ``device`` is not one of :data:`DEVICES`, or is ``cuda`` where torch sees no
            CUDA device (a CPU build of torch, or no GPU): the user's to fix (exit 2).
    """
    from regress.errors import UsageError

    if device not in DEVICES:
        raise UsageError(f"--device {device!r}: choose from {', '.join(DEVICES)}")
    if device == "cuda":
        from regress.devices import require_cuda

        require_cuda()


#: The functions and keyword arguments the mode rewrites; any other call passes straight through.
_PLACEMENT = frozenset({"cuda", "pin_memory", "to"})
_PLACEMENT_KWARGS = frozenset({"device", "pin_memory"})


def _is_cuda(device: Any) -> bool:
    return device is not None and str(device).startswith("cuda")


@functools.cache
def _mode_class():
    """The mode's class, built on first use (torch is imported then), once per process."""
    from torch.overrides import TorchFunctionMode

    class CudaOnCpu(TorchFunctionMode):
        """Rewrites CUDA placement to the CPU inside the sandbox."""

        def __init__(self, ledger: Ledger) -> None:
            super().__init__()
            self.ledger = ledger

        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", None)
            if name not in _PLACEMENT and not (kwargs and _PLACEMENT_KWARGS & kwargs.keys()):
                return func(*args, **(kwargs or {}))  # nothing placed: most calls, fast
            kwargs = dict(kwargs or {})
            name = name or str(func)
            if name == "cuda":
                self.ledger.note("cuda", "Tensor.cuda", "returns a CPU copy (twins never alias)")
                return args[0].clone()
            if name == "pin_memory" and args:
                self.ledger.note("cuda", "Tensor.pin_memory", "returns a CPU copy (unpinned)")
                return args[0].clone()
            if name == "to" and args:
                rest = list(args[1:])
                target = kwargs.get("device", rest[0] if rest else None)
                if _is_cuda(target):
                    self.ledger.note("cuda", "Tensor.to(cuda)", "returns a CPU copy")
                    if "device" in kwargs:
                        kwargs["device"] = "cpu"
                    else:
                        rest[0] = "cpu"
                    kwargs.pop("non_blocking", None)
                    kwargs["copy"] = True
                    return func(args[0], *rest, **kwargs)
            if _is_cuda(kwargs.get("device")):
                self.ledger.note("cuda", f"device=cuda in {name}", "allocated on the CPU")
                kwargs["device"] = "cpu"
            if kwargs.get("pin_memory"):
                self.ledger.note("cuda", f"pin_memory=True in {name}", "dropped (CPU build)")
                kwargs["pin_memory"] = False
            return func(*args, **kwargs)

    return CudaOnCpu


def regress_side() -> Any:
    """Leave the placement rewrite for regress's own tensor work (checks, fakes, inputs).

    Only upstream's code needs ``device="cuda"`` rewritten; regress's code allocates on the CPU
    already, and every torch call it makes would otherwise pay the Python-level dispatch.
    """
    import torch

    return torch._C.DisableTorchFunction()


def on_executor_device(obj: Any) -> Any:
    """``obj`` with its tensors where upstream's model executor keeps them: on the GPU in a
    native session (unchanged on a CPU).

    For the fakes that stand for the executor's side (the worker's inputs, the draft model, the
    spec metadata): a real executor hands a worker GPU tensors, and upstream indexes one with
    another, which needs both on one device. ``obj`` is a tensor (a copy is returned) or a fake
    whose tensor attributes are moved in place (it is returned).
    """
    if not _native_sessions:
        return obj
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to("cuda")
    for name, value in vars(obj).items():
        if isinstance(value, torch.Tensor):
            setattr(obj, name, value.to("cuda"))
    return obj


def device_mode(ledger: Ledger) -> Any:
    """The placement rewrite alone, for a thread that runs upstream code under :func:`cuda_on_cpu`.

    Under :func:`native_cuda` there is nothing to rewrite: a null context.
    """
    if _native_sessions:
        return contextlib.nullcontext()
    return _mode_class()(ledger)


class FakeEvent:
    """``torch.cuda.Event`` on a CPU: recording is a no-op and the event is always complete."""

    _ledger: Ledger | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _note(self._ledger, "torch.cuda.Event", "constructed on the CPU: always complete")

    def record(self, stream: Any = None) -> None:
        _note(self._ledger, "torch.cuda.Event.record", "no-op")

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        _note(self._ledger, "torch.cuda.Event.synchronize", "no-op")

    def wait(self, stream: Any = None) -> None:
        _note(self._ledger, "torch.cuda.Event.wait", "no-op")

    def elapsed_time(self, end_event: Any) -> float:
        return 0.0


class FakeStream:
    """``torch.cuda.Stream`` on a CPU: one implicit stream, every wait already satisfied."""

    _ledger: Ledger | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _note(self._ledger, "torch.cuda.Stream", "one CPU stream")

    def wait_stream(self, stream: Any) -> None:
        _note(self._ledger, "torch.cuda.Stream.wait_stream", "no-op")

    def wait_event(self, event: Any) -> None:
        _note(self._ledger, "torch.cuda.Stream.wait_event", "no-op")

    def record_event(self, event: Any = None) -> Any:
        event = event or FakeEvent()
        event.record()
        return event

    def synchronize(self) -> None:
        _note(self._ledger, "torch.cuda.Stream.synchronize", "no-op")

    def query(self) -> bool:
        return True

    def __enter__(self) -> FakeStream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _note(ledger: Ledger | None, name: str, detail: str) -> None:
    if ledger is not None:
        ledger.note("cuda", name, detail)


def _stream_context(stream: Any = None) -> Any:
    _note(FakeStream._ledger, "torch.cuda.stream", "context entered on the one CPU stream")
    return contextlib.nullcontext(stream)


def _patches(ledger: Ledger) -> dict[str, Any]:
    """The ``torch.cuda`` attributes replaced while the sandbox is entered."""
    return {
        "is_current_stream_capturing": lambda: _noted(
            ledger, "torch.cuda.is_current_stream_capturing", False
        ),
        "current_device": lambda: _noted(ledger, "torch.cuda.current_device", 0),
        "Event": FakeEvent,
        "Stream": FakeStream,
        "current_stream": lambda *a, **k: FakeStream(),
        "default_stream": lambda *a, **k: FakeStream(),
        "stream": _stream_context,
        "synchronize": lambda *a, **k: _noted(ledger, "torch.cuda.synchronize", None),
    }


@contextlib.contextmanager
def cuda_on_cpu(ledger: Ledger) -> Iterator[None]:
    """Enter the CUDA-on-CPU mode and the ``torch.cuda`` patches; undo both on exit."""
    import torch

    patches = _patches(ledger)
    saved = {name: getattr(torch.cuda, name) for name in patches}
    saved_ledgers = (FakeEvent._ledger, FakeStream._ledger)
    saved_record = torch.Tensor.record_stream
    FakeEvent._ledger = FakeStream._ledger = ledger
    for name, fn in patches.items():
        setattr(torch.cuda, name, fn)
    torch.Tensor.record_stream = lambda self, stream: _noted(  # type: ignore[method-assign]
        ledger, "Tensor.record_stream", None
    )
    try:
        with _mode_class()(ledger):
            yield
    finally:
        for name, fn in saved.items():
            setattr(torch.cuda, name, fn)
        torch.Tensor.record_stream = saved_record  # type: ignore[method-assign]
        FakeEvent._ledger, FakeStream._ledger = saved_ledgers


@contextlib.contextmanager
def native_cuda(ledger: Ledger) -> Iterator[None]:
    """Upstream's CUDA code as a GPU runs it: no rewrite, no fake; the GPU noted in the ledger."""
    global _native_sessions
    import torch

    require_device("cuda")
    index = torch.cuda.current_device()
    name = torch.cuda.get_device_name(index)
    major, minor = torch.cuda.get_device_capability(index)
    ledger.note(
        "cuda",
        "native",
        f"device=cuda tensors live on cuda:{index} ({name}, sm_{major}{minor}); events, streams "
        "and host/device copies are torch's own",
    )
    _native_sessions += 1
    try:
        yield
    finally:
        _native_sessions -= 1
        torch.cuda.synchronize()  # a kernel still running must not outlive the session


def placement(ledger: Ledger, device: str) -> Any:
    """The session's CUDA placement for ``device`` (:data:`DEVICES`)."""
    return native_cuda(ledger) if device == "cuda" else cuda_on_cpu(ledger)


def _noted(ledger: Ledger, name: str, value: Any) -> Any:
    ledger.note("cuda", name, f"returns {value!r} on the CPU")
    return value
