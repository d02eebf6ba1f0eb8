"""Whether this machine has the device a command was asked to run on.

``--device cuda`` on a machine whose torch sees no GPU (a CPU build, or no driver) is the user's to
fix, exit 2 like any bad input, and is refused before any work starts. ``accept``, ``defects
--check`` and ``check`` all ask here, so they refuse it in the same words.
"""

from __future__ import annotations

from regress.errors import UsageError


def require_cuda() -> None:
    """Raise :class:`UsageError` unless torch sees a CUDA device (torch is imported here)."""
    import torch

    if not torch.cuda.is_available():
        raise UsageError(
            "--device cuda: torch sees no CUDA device on this machine; use --device cpu"
        )
