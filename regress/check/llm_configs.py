"""``llm_configs``: every ``LLM`` configuration the GPU tests build, against the tree's ``llm_args.py``.

The integration tests (``tests/integration``) book a node of 8 GPUs; a field upstream renamed,
removed or now validates differently would fail there, hours in. This scenario builds each of their
configurations (:func:`regress.trtllm.integration.integration_specs`) on a CPU from the tree's own
``tensorrt_llm/llmapi/llm_args.py``, loaded in the sandbox: the config objects through
:func:`regress.trtllm.llm_config.to_llm_kwargs` with that module as the ``llmapi`` namespace, then
the arguments object ``LLM`` builds from them, so every upstream validator runs.

What ``LLM`` does is mirrored from ``tensorrt_llm/llmapi/llm.py`` ``BaseLLM.__init__`` (stored id
323158958, read through the code index): the PyTorch backend's arguments class is
``TorchLlmArgs``; a keyword that is not one of its ``model_fields`` is refused ("got invalid
argument"); then ``TorchLlmArgs.from_kwargs(...)``, which runs the pydantic model and its
validators. ``llm_args.py`` @ 00043967 has no ``from_kwargs``: the class itself is called there.
The module runs in a sandbox session of its own (:mod:`regress.sandbox.llm_args`).

Verdicts: a refusal by upstream (a pydantic ``ValidationError``, an unknown keyword, a class the
file no longer defines, a draft length the config does not keep, an exception raised in the tree's
own code) fails the case, naming the field and upstream's message. A tree without the file is
``skip`` (n/a); a file the sandbox cannot load, or a case that reaches a stub, is a ``gap`` naming
what it needs, never a pass.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from pathlib import Path
from typing import Any

from regress.check.results import ScenarioResult
from regress.check.status import ScenarioStatus
from regress.dsa.invariants import Violation
from regress.install import install_hint
from regress.sandbox.blame import blame, describe
from regress.sandbox.llm_args import LLM_ARGS, llm_args_file, llm_args_session

NAME = "llm_configs"
#: The arguments class ``LLM`` builds for the PyTorch backend (``llmapi/llm.py`` ``BaseLLM``).
ARGS_CLASS = "TorchLlmArgs"
#: The check of a refused configuration.
REFUSED = "llm_config_refused"
_KEYWORD = re.compile(r"unexpected keyword argument '(\w+)'")
_MISSING = re.compile(r"No module named '([\w.]+)'")


def llm_configs(up: Any) -> list[ScenarioResult]:
    """One result per configuration the integration tests build (see the module docstring)."""
    from regress.trtllm.integration import integration_specs

    path = llm_args_file(up.plan.checkout)
    if not path.is_file():
        note = f"n/a: the tree has no {path.relative_to(up.plan.checkout)}"
        return [ScenarioResult(NAME, status=ScenarioStatus.SKIP, note=note)]
    with contextlib.ExitStack() as stack:
        try:
            module = stack.enter_context(llm_args_session(up))
        except Exception as exc:  # upstream's module needs what the sandbox lacks
            why = describe(exc, blame(exc, up.plan.checkout))
            note = _hint(f"{LLM_ARGS} cannot load in the sandbox: {why}")
            return [ScenarioResult(NAME, status=ScenarioStatus.GAP, note=note)]
        args_cls = getattr(module, ARGS_CLASS, None)
        if args_cls is None:
            result = ScenarioResult(NAME)
            message = f"{LLM_ARGS} defines no {ARGS_CLASS}: LLM cannot build its arguments"
            result.add([Violation(REFUSED, message, {"field": ARGS_CLASS})], "loading llm_args")
            return [result]
        with tempfile.TemporaryDirectory(prefix="regress-llm-configs-") as root:
            built = list(integration_specs(root))
            return [_one(up, module, args_cls, b) for b in built]


def _hint(why: str) -> str:
    """``why``, and what to install when what is missing is a package, not the tree's module."""
    missing = _MISSING.search(why)
    if missing is None or missing.group(1).split(".")[0] == "tensorrt_llm":
        return why
    return (
        f"{why.rstrip('.')}. Install the packages llm_args.py imports ({install_hint('check')}), "
        "then run the check again"
    )


def _one(up: Any, module: Any, args_cls: type, built: Any) -> ScenarioResult:
    from regress.trtllm.llm_config import to_llm_kwargs

    result = ScenarioResult(f"{NAME}/{built.test_id}")
    Path(built.spec.model).mkdir(parents=True, exist_ok=True)  # the checkpoint's place
    heard = len(_messages(module))
    try:
        kwargs = to_llm_kwargs(built.spec, llmapi=module)
        _refuse_unknown(args_cls, kwargs)
        build, how = _constructor(args_cls)
        build(**_with_backend(args_cls, kwargs))
    except Exception as exc:  # judged below: a refusal, or a gap
        found = _refusals(exc, up.plan.checkout)
        if found is None:
            result.status = ScenarioStatus.GAP
            result.note = describe(exc, blame(exc, up.plan.checkout))
            return result
        for field, message in found:
            details = {"case": built.test_id, "field": field}
            text = f"{built.test_id}: {field}: {message}"
            result.add([Violation(REFUSED, text, details)], "building the LLM arguments")
        result.note = f"refused by the tree's {LLM_ARGS}"
        return result
    shown = ", ".join(sorted(kwargs))
    result.note = f"{how} accepted {len(kwargs)} arguments: {shown}"
    if said := _deprecations(module, heard):
        result.note += f"; upstream warned: {' | '.join(said)}"
    return result


def _messages(module: Any) -> list[tuple[str, str]]:
    """What upstream logged so far, where the session's logger keeps it (``RecordingLogger``)."""
    return getattr(getattr(module, "logger", None), "messages", None) or []


def _deprecations(module: Any, since: int) -> list[str]:
    """Upstream's deprecation warnings about what this case passed: accepted today, refused by a
    later release (``MTPDecodingConfig`` @ 00043967 on ``num_nextn_predict_layers``)."""
    said = [text for _, text in _messages(module)[since:] if "deprecat" in text.lower()]
    return list(dict.fromkeys(said))


def _constructor(args_cls: type) -> tuple[Any, str]:
    """``from_kwargs`` where the class has it (``llm.py`` stored id 323158958 calls it), else the
    class (``llm_args.py`` @ 00043967 defines none)."""
    build = getattr(args_cls, "from_kwargs", None)
    if build is not None:
        return build, f"{args_cls.__name__}.from_kwargs"
    return args_cls, f"{args_cls.__name__}(...)"


def _refuse_unknown(args_cls: type, kwargs: dict[str, Any]) -> None:
    """``BaseLLM.__init__``'s own check: a keyword that is no field of the class is refused."""
    fields = getattr(args_cls, "model_fields", None)
    if not fields:
        return
    unknown = sorted(set(kwargs) - set(fields))
    if unknown:
        raise _Unknown(unknown, args_cls.__name__)


def _with_backend(args_cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``LLM`` passes ``backend="pytorch"`` where the class has that field."""
    if "backend" in (getattr(args_cls, "model_fields", None) or {}):
        return {**kwargs, "backend": "pytorch"}
    return kwargs


class _Unknown(Exception):
    def __init__(self, names: list[str], owner: str) -> None:
        super().__init__(f"{owner} has no field {', '.join(names)}")
        self.names = names
        self.owner = owner


def _refusals(exc: BaseException, checkout: Path) -> list[tuple[str, str]] | None:
    """``(field, upstream's message)`` for each thing upstream refused, or None for a gap."""
    from regress.errors import EngineError
    from regress.sandbox import SandboxGap

    if isinstance(exc, SandboxGap):
        return None
    if isinstance(exc, _Unknown):
        return [(n, f"not a field of {exc.owner} (LLM: got invalid argument)") for n in exc.names]
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ == "ValidationError" and callable(errors):
        title = getattr(exc, "title", "the model")
        return [
            (".".join(str(p) for p in e.get("loc", ())) or title, f"{title}: {e.get('msg', exc)}")
            for e in errors()
        ]
    if isinstance(exc, AttributeError) and getattr(exc, "name", None) and _is_module(exc.obj):
        return [(exc.name, f"{LLM_ARGS} defines no {exc.name}")]
    if isinstance(exc, TypeError) and (match := _KEYWORD.search(str(exc))):
        return [(match.group(1), str(exc))]
    if isinstance(exc, EngineError) and "draft tokens" in str(exc):  # build_mtp_config's proof
        return [("speculative_config.max_draft_len", str(exc))]
    found = blame(exc, checkout)
    if found.owner == "upstream":
        return [(found.site or "?", f"{type(exc).__name__}: {exc}")]
    return None


def _is_module(obj: Any) -> bool:
    import types

    return isinstance(obj, types.ModuleType)
