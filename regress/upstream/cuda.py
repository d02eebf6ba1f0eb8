"""CUDA on a CPU: device ``cuda`` allocations land on the CPU, host/device twins stay distinct.

Upstream DSA metadata keeps a pinned host buffer and a device buffer for most fields and copies
one into the other (``host_x`` -> ``x``). On a CPU the cheap mapping (``.cuda()`` returns the same
tensor) would alias the twins, so a missing host-to-device copy, which is a real bug on a GPU,
would go unnoticed. Here ``.cuda()`` and ``.to("cuda")`` always copy, ``pin_memory`` is dropped,
and ``torch.cuda.is_current_stream_capturing()`` (which raises on a CPU build) is False. Every
interception is counted in the :class:`~regress.upstream.Ledger`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from regress.upstream import Ledger


def _is_cuda(device: Any) -> bool:
    return device is not None and str(device).startswith("cuda")


def _mode_class():
    from torch.overrides import TorchFunctionMode

    class CudaOnCpu(TorchFunctionMode):
        """Rewrites CUDA placement to the CPU inside the sandbox."""

        def __init__(self, ledger: Ledger) -> None:
            super().__init__()
            self.ledger = ledger

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", str(func))
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


@contextlib.contextmanager
def cuda_on_cpu(ledger: Ledger) -> Iterator[None]:
    """Enter the CUDA-on-CPU mode and the ``torch.cuda`` patches; undo both on exit."""
    import torch

    patches = {
        "is_current_stream_capturing": lambda: _noted(
            ledger, "torch.cuda.is_current_stream_capturing", False
        ),
        "current_device": lambda: _noted(ledger, "torch.cuda.current_device", 0),
    }
    saved = {name: getattr(torch.cuda, name) for name in patches}
    for name, fn in patches.items():
        setattr(torch.cuda, name, fn)
    try:
        with _mode_class()(ledger):
            yield
    finally:
        for name, fn in saved.items():
            setattr(torch.cuda, name, fn)


def _noted(ledger: Ledger, name: str, value: Any) -> Any:
    ledger.note("cuda", name, f"returns {value!r} on the CPU")
    return value
