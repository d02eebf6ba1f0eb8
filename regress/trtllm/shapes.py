"""What a layer-wise GEN pack's metadata must look like: :class:`ShapeResult` and its checks.

:mod:`regress.trtllm.layerwise` drives upstream's layer-wise benchmark runner (in a child
process, since DeepGEMM's host assertion may kill it); this module judges what one pack built:
the DeepGEMM shape assertion in a failure's text, the metadata the pack captured, and the width
contract (DSA) or the untouched spec-dec fields (every other backend).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from regress.dsa.announce import DEEPGEMM_ASSERT

# DeepGEMM prints the failed condition, not the macro: match the condition, spacing-tolerant.
_CONDITION = re.compile(r"batch_size\s*==\s*__batch_size\s+and\s+next_n\s*==\s*_next_n")


def find_deepgemm_assertion(text: str | None) -> str | None:
    """The line of ``text`` carrying DeepGEMM's ``fp8_paged_mqa_logits`` shape assertion, if any.

    That assertion (``csrc/apis/attention.hpp``) is bug 2's signature: q has ``next_n`` tokens
    per request while ``kv_lens_cuda_2d`` was built one column wide. Other failures are reported
    as errors, not as this signature. The condition text was checked in DeepGEMM's
    ``csrc/apis/attention.hpp`` (a stored version, commit unknown); newer DeepGEMM (@ 0274ad7b) names the
    function ``fp8_fp4_paged_mqa_logits``, which is why only the condition is matched.
    """
    if not text:
        return None
    for line in text.splitlines():
        if _CONDITION.search(line):
            return line.strip()
    return None


@dataclass
class ShapeResult:
    """One GEN pack at one ``seq_len_q``: did it run, and were the metadata shapes right?

    Attributes:
        backend: ``"dsa"`` or ``"dense"`` (the non-DSA twin).
        batch_size: requests in the pack.
        seq_len_q: query tokens per request (1 + draft tokens).
        ran: the forward pass completed.
        deepgemm_assertion: the DeepGEMM shape assertion line, when that is what failed.
        error: any other failure (exception or dead child process).
        violations: contract violations on the pack's metadata (``regress.dsa.invariants``).
        metadata_class: the attention metadata class the runner built.
        max_total_draft_tokens: its value after the pack was prepared.
        kv_lens_2d_shape: ``kv_lens_cuda_2d.shape`` for DSA metadata.
        buffer: the indexer buffer set the step reads (``regress.trtllm.mtp_buffers``).
        sm: the GPU's compute capability, ``major * 10 + minor``.
    """

    backend: str
    batch_size: int
    seq_len_q: int
    ran: bool = False
    deepgemm_assertion: str | None = None
    error: str | None = None
    violations: list[dict[str, Any]] = field(default_factory=list)
    metadata_class: str | None = None
    max_total_draft_tokens: Any = None
    kv_lens_2d_shape: list[int] | None = None
    buffer: str | None = None
    sm: int | None = None

    @property
    def ok(self) -> bool:
        return self.ran and not self.deepgemm_assertion and not self.error and not self.violations

    def describe(self) -> str:
        head = f"{self.backend} GEN batch={self.batch_size} seq_len_q={self.seq_len_q}"
        if self.ok:
            return f"{head}: ok"
        parts = []
        if self.deepgemm_assertion:
            parts.append(f"DeepGEMM assertion ({DEEPGEMM_ASSERT}): {self.deepgemm_assertion}")
        if self.error:
            parts.append(f"error: {self.error}")
        parts += [v.get("message", str(v)) for v in self.violations]
        if not self.ran and not parts:
            parts.append("did not run")
        return f"{head}: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShapeResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def metadata_of(run_pack: Callable[..., Any]) -> Any:
    """The attention metadata a ``create_run_pack`` closure captured, or None.

    ``create_run_pack`` returns a ``run_pack`` closure over its ``attn_metadata``; reading the
    closure avoids re-implementing the pack construction just to see the metadata.
    """
    try:
        nonlocals = inspect.getclosurevars(run_pack).nonlocals
    except TypeError:
        return None
    if "attn_metadata" in nonlocals:
        return nonlocals["attn_metadata"]
    for value in nonlocals.values():
        if hasattr(value, "max_total_draft_tokens") and hasattr(value, "prepare"):
            return value
    return None


# What "never announced" looks like where a class declares no default: upstream's non-DSA
# metadata keeps max_total_draft_tokens None until update_spec_dec_param() sets it.
_UNSET = {"max_total_draft_tokens": None}


def default_spec_state(metadata: Any) -> dict[str, Any]:
    """The spec-dec fields as a freshly built object of this class has them.

    The non-DSA check compares against these: an MTP shape announcement must not have touched
    them (``regress.dsa.invariants.check_dense_untouched``). Defaults come from the dataclass
    fields, else class attributes, else the known unset value; a field whose default cannot be
    known is taken as it is (not judged) rather than guessed.
    """
    from regress.dsa.invariants import SPEC_FIELDS

    fields = (
        {f.name: f for f in dataclasses.fields(type(metadata))}
        if dataclasses.is_dataclass(metadata)
        else {}
    )
    defaults: dict[str, Any] = {}
    for name in SPEC_FIELDS:
        f = fields.get(name)
        if f is not None and f.default is not dataclasses.MISSING:
            defaults[name] = f.default
        elif f is not None and f.default_factory is not dataclasses.MISSING:
            defaults[name] = f.default_factory()
        elif hasattr(type(metadata), name):
            defaults[name] = getattr(type(metadata), name)
        elif name in _UNSET:
            defaults[name] = _UNSET[name]
        else:
            defaults[name] = getattr(metadata, name, None)
    return defaults


def check_metadata(metadata: Any, result: ShapeResult) -> None:
    """Fill ``result`` with the metadata's class, shapes and contract violations.

    DSA metadata is held to the width contract of the buffer set its step reads, and on sm90 to
    the expanded set for K > 1 (``regress.trtllm.mtp_buffers``).
    """
    from regress.dsa.invariants import check_dense_untouched
    from regress.trtllm import mtp_buffers

    result.metadata_class = f"{type(metadata).__module__}.{type(metadata).__qualname__}"
    result.max_total_draft_tokens = getattr(metadata, "max_total_draft_tokens", None)
    if hasattr(metadata, "kv_lens_cuda_2d"):
        result.kv_lens_2d_shape = [int(x) for x in metadata.kv_lens_cuda_2d.shape]
        result.buffer = mtp_buffers.buffer_in_use(metadata)
        found = mtp_buffers.check_width(metadata)
        if result.sm is not None:
            found += mtp_buffers.check_arch_buffers(metadata, result.sm)
    else:
        found = check_dense_untouched(default_spec_state(metadata), metadata)
    result.violations = [dataclasses.asdict(v) for v in found]
