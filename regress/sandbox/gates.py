"""The fused DSA decode-metadata gates of a tree: their names, sense and defaults, read from source.

Upstream switches its fused decode-metadata kernel (one Triton launch replacing the eager map +
slot-mapping chain in ``on_update_kv_lens()``) with an environment variable whose name and sense
changed: ``TRTLLM_FUSED_DSA_METADATA`` fuses only for "1" (default off;
``attention/backends/sparse/dsa/metadata.py`` @ 186080bb ``_fused_dsa_meta_enabled``, cached per
process), ``TRTLLM_DISABLE_FUSED_DSA_METADATA`` disables it with "1" (fusion on by default;
upstream's ``test_fused_metadata.py`` @ 5de04e21). Which gates a tree reads, and what each means
unset, is read from the tree's own DSA module, so a sandbox session can run upstream's default or
either value (:meth:`regress.sandbox.eras.EraPlan.session_env`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

#: A gate read by the DSA module: ``os.environ.get("TRTLLM_..FUSED..")``.
_FUSED_GATE = re.compile(r"""os\.(?:environ\.get|getenv)\(\s*["']([A-Z0-9_]*FUSED[A-Z0-9_]*)["']""")
#: ``os.environ.get("NAME", "D") == "V"`` (or ``!=``): the gate's default and sense, read exactly.
_GATE_TEST = (
    r"""os\.(?:environ\.get|getenv)\(\s*["']({name})["']\s*(?:,\s*["']([^"']*)["']\s*)?\)"""
    r"""\s*(==|!=)\s*["']([^"']*)["']"""
)


@dataclass(frozen=True)
class FusedGate:
    """One fused-metadata environment gate of the tree.

    Attributes:
        name: the environment variable.
        on_value / off_value: what to set it to for the fused kernel / the eager chain.
        default_on: whether upstream fuses when the variable is unset.
        read: how the sense was found (the source expression, or the name's sense).
    """

    name: str
    on_value: str
    off_value: str
    default_on: bool
    read: str

    def value(self, fused: bool) -> str:
        return self.on_value if fused else self.off_value


def _other(value: str) -> str:
    return "0" if value != "0" else "1"


def read_gate(name: str, text: str) -> FusedGate:
    """The sense and default of gate ``name`` as the DSA module's source reads it."""
    match = re.search(_GATE_TEST.format(name=re.escape(name)), text)
    if match is not None:
        default, op, wanted = match.group(2), match.group(3), match.group(4)
        unset = default
        if op == "==":
            on, off = wanted, (unset if unset not in (None, wanted) else _other(wanted))
            default_on = unset == wanted
        else:
            on = unset if unset not in (None, wanted) else _other(wanted)
            off, default_on = wanted, unset != wanted
        read = f"os.environ.get({name!r}, {default!r}) {op} {wanted!r} in the source"
        return FusedGate(name, on, off, default_on, read)
    if "DISABLE" in name:
        return FusedGate(name, "0", "1", True, "by its name: a DISABLE gate, fusion on when unset")
    return FusedGate(name, "1", "0", False, "by its name: fusion only when set to 1")


def fused_gates(dsa_file: Path) -> tuple[FusedGate, ...]:
    """The fused-DSA-metadata environment gates the DSA module reads, in source order."""
    try:
        text = dsa_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    return tuple(read_gate(name, text) for name in dict.fromkeys(_FUSED_GATE.findall(text)))


__all__ = ["FusedGate", "fused_gates", "read_gate"]


@dataclass(frozen=True)
class KernelImport:
    """Where the DSA module takes its fused decode-metadata kernel from.

    ``from .fused_metadata import fused_dsa_decode_metadata`` (``sparse/dsa/metadata.py`` @
    186080bb, line 24): the kernel is a sibling module of the tree, which a complete checkout has.

    Attributes:
        file: the module file the import names, resolved beside the DSA module.
        names: the ``fused_*`` names imported.
        line: the import's line in the DSA module.
    """

    file: Path
    names: tuple[str, ...]
    line: int


def kernel_imports(dsa_file: Path) -> tuple[KernelImport, ...]:
    """The relative imports of ``fused_*`` names in the DSA module (read, never run)."""
    try:
        tree = ast.parse(dsa_file.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError):
        return ()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level or not node.module:
            continue
        names = tuple(a.name for a in node.names if a.name.startswith("fused_"))
        if names:
            base = dsa_file.parent
            for _ in range(node.level - 1):
                base = base.parent
            file = base.joinpath(*node.module.split(".")).with_suffix(".py")
            found.append(KernelImport(file, names, node.lineno))
    return tuple(found)
