"""The CPU sandbox: runs real TensorRT-LLM Python (the DSA metadata, the speculative workers) from a
source checkout on a CPU, with no build, no wheel and no GPU.

It owns how upstream's code is loaded (``shells``: package shells whose ``__init__`` never runs;
``stubs``: strict stubs for compiled and GPU-only modules), what it is given instead of the missing
pieces (``eras``: the stubs' values and how metadata is built; ``fakes``: the KV-cache managers;
``cuda``: CUDA on the CPU; ``drafts`` and ``workers``: the draft model, spec metadata and inputs
handed to upstream's one-model workers), whose code raised (``blame``: a verdict or a gap) and
upstream's own unit tests run through it (``pytest_sandbox``). Where the tree's files are is
:mod:`regress.tree`'s; what is checked, :mod:`regress.check`'s.

The vocabulary shared by the sandbox modules lives here: :class:`SandboxGap` (the tree needs
something the sandbox does not provide: exit 3) and :class:`Ledger` (everything the sandbox faked,
so a reader can judge the result; its JSON form written and read side by side).
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
        kind: ``module-stub``, ``value``, ``cuda``, ``collaborator``, ``shim`` or ``env``.
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

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Ledger:
        """The ledger :meth:`to_json` wrote."""
        ledger = cls(
            real_modules=list(doc.get("real_modules", [])),
            divergences=list(doc.get("cpu_gpu_divergences", [])),
        )
        for f in doc.get("faked", []):
            ledger.fakes[(f["kind"], f["name"])] = Fake(**f)
        return ledger


__all__ = ["Fake", "Ledger", "SandboxGap"]
