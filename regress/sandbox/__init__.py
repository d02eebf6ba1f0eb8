"""Run real TensorRT-LLM Python (the DSA metadata) from a source checkout on a CPU.

The vocabulary shared by the sandbox modules lives here: :class:`SandboxGap` (the tree needs
something the sandbox does not provide: exit 3) and :class:`Ledger` (everything the sandbox faked,
so a reader can judge the result). ``check.run_check`` is the library entry point.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from regress.errors import EngineError


class SandboxGap(EngineError):
    """The real code reached something the sandbox cannot run or has no value for.

    Attributes:
        piece: what is missing (a stubbed name, a module, a constructor argument).
        site: the upstream call site (``path:line in function``), when one is known.
    """

    def __init__(self, piece: str, site: str | None = None, *, hint: str = "") -> None:
        where = f" at {site}" if site else ""
        message = f"the sandbox cannot run this tree: upstream needs {piece}{where}. " + (
            hint or "Add a value for it to regress.sandbox.eras if faking it is safe."
        )
        super().__init__(message)
        self.piece = piece
        self.site = site


@dataclass
class Fake:
    """One thing the sandbox supplied instead of upstream code.

    Attributes:
        kind: ``module-stub``, ``placeholder``, ``shell``, ``value``, ``cuda``, ``collaborator``,
            ``shim``, ``env``; ``probe`` (an absent package refused to a probe), ``compile``
            (``torch.compile`` as the identity) and ``triton`` (a real kernel launched: not a
            fake, counted here so the report says it ran).
        name: the dotted name or the operation faked.
        detail: what was given instead, and why.
        count: how often it was used.
    """

    kind: str
    name: str
    detail: str = ""
    count: int = 0


@dataclass
class Ledger:
    """Everything faked during one sandbox session, plus the real modules executed."""

    real_modules: list[str] = field(default_factory=list)
    fakes: dict[tuple[str, str], Fake] = field(default_factory=dict)
    divergences: list[str] = field(default_factory=list)

    def note(self, kind: str, name: str, detail: str = "") -> None:
        fake = self.fakes.setdefault((kind, name), Fake(kind, name, detail))
        fake.count += 1
        if detail and not fake.detail:
            fake.detail = detail

    def to_json(self) -> dict[str, Any]:
        return {
            "real_modules": list(self.real_modules),
            "faked": [
                asdict(f) for f in sorted(self.fakes.values(), key=lambda f: (f.kind, f.name))
            ],
            "cpu_gpu_divergences": list(self.divergences),
        }


__all__ = ["Fake", "Ledger", "SandboxGap"]
