"""The tree's ``tensorrt_llm/llmapi/llm_args.py``, run in a sandbox session of its own.

``llm_args.py`` is pydantic models and their validators: plain Python that runs on a CPU. What it
imports from the rest of the tree does not (the compiled bindings, the TensorRT logger, the
tokenizer loader, ``mapping.py`` and ``models/modeling_utils.py`` with their compiled imports), so
a session that only stubs them stops at the first class definition that uses one. This session
runs ``llm_args.py`` and the plain modules of :data:`REAL_WITH` from the tree and answers the rest
with the stand-ins below, each with its reason in the ledger. Which names get one is read from the
tree's own ``llm_args.py`` (its imports and the enum members it names), so a version that imports
a name this table does not know still reaches a strict placeholder: a gap, never a silent value.

Read for ``llm_args.py`` @ 00043967 (NVIDIA/TensorRT-LLM): module-level imports from
``..bindings.executor``, ``..bindings.internal.*``, ``..logger``, ``..mapping``,
``..models.modeling_utils``, ``.tokenizer``, ``.utils`` and ``..usage.config``; class bodies that
call ``TelemetryField.categorical`` and ``PybindMirror.mirror_pybind_enum`` at import time;
validators that call ``logger``, ``tokenizer_factory`` and ``QuantConfig()``.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The module, dotted.
LLM_ARGS = "tensorrt_llm.llmapi.llm_args"
#: Plain modules ``llm_args.py`` imports, run from the tree where it has them: ``usage/config.py``
#: (@ 222982db) holds ``TelemetryField`` and ``TelemetryConfig`` and imports only pydantic.
REAL_WITH = ("tensorrt_llm.usage.config",)
#: Where the compiled bindings live: every name ``llm_args.py`` imports from there gets
#: :func:`binding_stand_in`.
BINDINGS = "tensorrt_llm.bindings"
#: Enums of modules the sandbox stubs: ``llm_args.py`` uses ``CpType`` as a pydantic field type
#: and names its members (``CpType.ULYSSES`` as a default, ``CpType.HELIX`` in a validator).
ENUMS = {"tensorrt_llm.mapping": ("CpType",)}
_BINDING_WHY = (
    "compiled binding, not on a CPU: a class with no fields or members, so the PybindMirror "
    "checks of llm_args.py find nothing to compare (vacuous here, real on a GPU box)"
)


def _strict_base_model() -> type:
    from pydantic import BaseModel, ConfigDict

    class StrictBaseModel(BaseModel):
        """Stand-in for ``llmapi/utils.py``'s base: unknown fields refused."""

        model_config = ConfigDict(extra="forbid")

    return StrictBaseModel


class QuantConfigStandIn:
    """Stand-in for ``models/modeling_utils.py``'s ``QuantConfig``: built by a validator, kept."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)
        self.kv_cache_quant_algo = fields.get("kv_cache_quant_algo")


def binding_stand_in(name: str) -> type:
    """A class for a compiled binding name: no members, no fields, constructible."""
    return type(name, (), {"__members__": {}, "__init__": lambda self, *a, **k: None})


class LoggerStandIn:
    """Stand-in for ``tensorrt_llm.logger.logger``: its messages go to Python logging."""

    def __init__(self) -> None:
        self._log = logging.getLogger("tensorrt_llm")

    def _say(self, level: int, msg: Any, *args: Any) -> None:
        self._log.log(level, str(msg), *args)

    def debug(self, msg: Any, *args: Any) -> None:
        self._say(logging.DEBUG, msg, *args)

    def info(self, msg: Any, *args: Any) -> None:
        self._say(logging.INFO, msg, *args)

    def warning(self, msg: Any, *args: Any) -> None:
        self._say(logging.WARNING, msg, *args)

    def error(self, msg: Any, *args: Any) -> None:
        self._say(logging.ERROR, msg, *args)


def _no_tokenizer(*args: Any, **kwargs: Any) -> None:
    return None


def _type_repr(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or str(obj)


def _docstring(*args: Any, **kwargs: Any) -> str:
    return ""


def _imports(tree: ast.Module) -> dict[str, list[str]]:
    """``absolute module -> names`` of the module-level ``from X import names`` of llm_args."""
    package = LLM_ARGS.rpartition(".")[0].split(".")
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        base = package[: len(package) - node.level + 1] if node.level else []
        module = ".".join([*base, node.module] if node.module else base)
        out.setdefault(module, []).extend(a.name for a in node.names if a.name != "*")
    return out


def _members(tree: ast.Module, name: str) -> list[str]:
    """The attributes read on ``name`` anywhere in the module (``CpType.HELIX`` -> HELIX)."""
    found = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name
    }
    return sorted(found)


def stand_ins(source: str) -> dict[str, dict[str, tuple[Any, str]]]:
    """The sandbox values for one ``llm_args.py`` (``{module: {name: (value, why)}}``)."""
    tree = ast.parse(source)
    imports = _imports(tree)
    values: dict[str, dict[str, tuple[Any, str]]] = {
        "tensorrt_llm.llmapi.utils": {
            "StrictBaseModel": (
                _strict_base_model(),
                "pydantic BaseModel with extra='forbid', the contract usage/config.py @ 222982db "
                "states for it (llmapi/utils.py imports huggingface_hub, filelock, psutil)",
            ),
            "generate_api_docs_as_docstring": (_docstring, "API docs only"),
            "get_type_repr": (_type_repr, "a type's name for a JSON-schema hint only"),
        },
        "tensorrt_llm.logger": {
            "logger": (
                LoggerStandIn(),
                "Python logging (upstream's logger wraps the TensorRT one)",
            )
        },
        "tensorrt_llm.llmapi.tokenizer": {
            "tokenizer_factory": (_no_tokenizer, "no tokenizer: the checkpoint is an empty folder")
        },
        "tensorrt_llm.models.modeling_utils": {
            "QuantConfig": (QuantConfigStandIn, "built by a validator, only read for fp8 KV")
        },
    }
    for module, names in imports.items():
        if module == BINDINGS or module.startswith(BINDINGS + "."):
            for name in names:
                values.setdefault(module, {})[name] = (binding_stand_in(name), _BINDING_WHY)
    for module, enums in ENUMS.items():
        for name in enums:
            members = _members(tree, name)
            if name in imports.get(module, []) and members:
                stand_in = enum.IntEnum(name, members)
                why = f"an enum of the members llm_args.py names ({', '.join(members)})"
                values.setdefault(module, {})[name] = (stand_in, why)
    return values


def llm_args_file(checkout: Path) -> Path:
    """Where a checkout keeps upstream's ``llm_args.py`` (:data:`LLM_ARGS`)."""
    return Path(checkout) / (LLM_ARGS.replace(".", "/") + ".py")


@contextlib.contextmanager
def llm_args_session(up: Any) -> Iterator[Any]:
    """The tree's ``llm_args`` module in a nested sandbox with :func:`stand_ins` (where the session
    already answers a name, as ``eras`` does for ``logger``, its answer stays); the cases run
    inside it, since validators import lazily. Raises what loading raises (the caller judges)."""
    from regress.sandbox.shells import Sandbox

    outer = up.sandbox
    path = llm_args_file(outer.checkout)
    values = {**outer.values}
    for module, names in stand_ins(path.read_text(encoding="utf-8", errors="replace")).items():
        values[module] = {**names, **values.get(module, {})}  # the session's own answers win
    real = set(outer.real) | {LLM_ARGS}
    real |= {m for m in REAL_WITH if (outer.checkout / (m.replace(".", "/") + ".py")).is_file()}
    with Sandbox(outer.checkout, real, values, env=outer.env, ledger=up.ledger) as inner:
        yield inner.load(LLM_ARGS)
