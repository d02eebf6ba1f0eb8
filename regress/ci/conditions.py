"""A test-db block's ``condition``: which system facts select the block, compared as upstream does.

Upstream renders a list with ``trt-test-db --context CTX --match(-exact) '{facts as JSON}'``
(``tests/integration/test_lists/test-db/README.md`` @ 11ea7cc3; ``renderTestDB`` in
``jenkins/L0_Test.groovy``). The facts come from ``tests/integration/defs/sysinfo/get_sysinfo.py``
(@ 30993b6e) plus stage-name flags: ``gpu`` is the upper-cased product name without ``NVIDIA``
(``H200``), numbers are passed as strings (``"system_gpu_count": "8"``), ``true``/``false`` become
booleans and ``none`` null (``getMakoOpts``). A condition has three kinds of test, each over any key:

- ``ranges``: ``gte``/``lte``/``gt``/``lt`` bounds on a number (a numeric string counts);
- ``wildcards``: a shell pattern, or a list of them (any may match), compared without regard to
  case (the lists write ``'*h200*'`` for the fact ``H200``);
- ``terms``: equality after normalising both sides, so ``supports_fp8: true`` matches the fact
  ``true`` or ``"True"`` and ``system_gpu_count: 8`` matches ``"8"``.

A fact the query does not give: with ``--match`` it does not constrain (L0_Test.groovy: "only tests
with backend=pytorch or unspecified backend will be run" when the stage name gives no backend);
with ``--match-exact``, and for the stages of ``stages.yml``, whose facts are declared in full, a
block that tests a missing fact does not match. ``trt-test-db`` itself is not public, so this
reading of its two modes comes from those callers.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
from collections.abc import Mapping
from dataclasses import dataclass

CONDITION_KEYS = ("ranges", "wildcards", "terms")
RANGE_BOUNDS = ("gte", "lte", "gt", "lt")
#: The values upstream's docs give the two terms every stage sets (ci-overview.md).
STAGE_TERMS = ("pre_merge", "post_merge")
BACKENDS = ("pytorch", "tensorrt", "cpp", "triton", "autodeploy", "generic")
#: Facts upstream's callers pass to trt-test-db: get_sysinfo.py's keys plus the stage-name flags
#: of L0_Test.groovy. Any other key is allowed; one that is a near miss of these is a typo.
KNOWN_FACTS = (
    "gpu", "gpu_memory", "chip", "system_gpu_count", "compute_capability", "supports_fp8",
    "supports_int8", "supports_tf32", "cpu", "sysname", "is_aarch64", "is_linux", "is_power",
    "is_wsl", "is_native_windows", "is_android", "is_remote", "linux_distribution_name",
    "linux_version", "linux_codename", "host_mem_available_mib", "host_mem_total_mib", "hostname",
    "cuda_version", "cublas_version", "cudnn_version", "stage", "backend", "orchestrator",
    "auto_trigger",
)  # fmt: skip


def canonical(value: object) -> object:
    """A fact or term value in one comparable form: bool, float, None or a string.

    Mirrors the conversions upstream applies on the way to ``trt-test-db`` (``getMakoOpts``:
    ``true``/``false`` -> booleans, ``none`` -> null) and treats numeric strings as numbers.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def _same(a: object, b: object) -> bool:
    # bool is an int in Python: keep `true` from equalling 1.
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _as_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class Condition:
    """Every part present must hold for a block to be selected.

    Attributes:
        ranges: ``(key, low, high)`` with inclusive float bounds (``gt``/``lt`` folded in), or None.
        wildcards: ``(key, patterns)``; any pattern may match.
        terms: ``(key, value)`` with the value as written in the YAML.
    """

    ranges: tuple[tuple[str, float | None, float | None, bool, bool], ...] = ()
    wildcards: tuple[tuple[str, tuple[str, ...]], ...] = ()
    terms: tuple[tuple[str, object], ...] = ()

    def keys(self) -> set[str]:
        """Every fact this condition tests."""
        return (
            {r[0] for r in self.ranges}
            | {w[0] for w in self.wildcards}
            | {t[0] for t in self.terms}
        )

    def matches(self, facts: Mapping[str, object], *, exact: bool = True) -> bool:
        """Whether ``facts`` select this block.

        Args:
            facts: system facts (a stage's, or a ``--match`` query).
            exact: a tested fact missing from ``facts`` fails the block (True) or is ignored.
        """
        for key, low, high, low_open, high_open in self.ranges:
            if key not in facts:
                if exact:
                    return False
                continue
            value = canonical(facts[key])
            if isinstance(value, bool) or not isinstance(value, float):
                return False
            if low is not None and (value < low or (low_open and value == low)):
                return False
            if high is not None and (value > high or (high_open and value == high)):
                return False
        for key, patterns in self.wildcards:
            if key not in facts:
                if exact:
                    return False
                continue
            if facts[key] is None:
                return False
            text = _as_text(facts[key]).lower()
            if not any(fnmatch.fnmatchcase(text, p.lower()) for p in patterns):
                return False
        for key, expected in self.terms:
            if key not in facts:
                if exact:
                    return False
                continue
            if not _same(canonical(facts[key]), canonical(expected)):
                return False
        return True


def _typo(reader, key_node, key: str, where: str) -> bool:
    """Flag a fact name that is a near miss of a known one (any other name is allowed)."""
    if key in KNOWN_FACTS:
        return False
    near = difflib.get_close_matches(key, KNOWN_FACTS, n=1, cutoff=0.8)
    if near:
        reader.add(key_node, f"unknown fact {key!r} in {where}; did you mean {near[0]!r}?")
    return bool(near)


def parse_condition(reader, node) -> Condition:
    """Read a ``condition:`` mapping node; problems go to ``reader`` with their lines."""
    import yaml

    ranges = []
    wildcards = []
    terms = []
    for key, key_node, value in reader.mapping(node, "condition"):
        if key == "ranges":
            for var, var_node, bounds in reader.mapping(value, "ranges"):
                if _typo(reader, var_node, var, "ranges"):
                    continue
                parsed = _parse_range(reader, var, bounds)
                if parsed is not None:
                    ranges.append(parsed)
        elif key == "wildcards":
            for var, var_node, patterns in reader.mapping(value, "wildcards"):
                if _typo(reader, var_node, var, "wildcards"):
                    continue
                wildcards.append((var, tuple(reader.strings(patterns, f"wildcards.{var}"))))
        elif key == "terms":
            for var, var_node, term in reader.mapping(value, "terms"):
                if _typo(reader, var_node, var, "terms"):
                    continue
                if not isinstance(term, yaml.ScalarNode) or term.tag.endswith(":null"):
                    reader.add(term, f"terms.{var} must be a single value (string, number or bool)")
                    continue
                scalar = reader.scalar(term)
                allowed = {"stage": STAGE_TERMS, "backend": BACKENDS}.get(var)
                if allowed is not None and scalar not in allowed:
                    hint = difflib.get_close_matches(str(scalar), allowed, n=1, cutoff=0.5)
                    reader.add(
                        term,
                        f"terms.{var} is {scalar!r}"
                        + (f"; did you mean {hint[0]!r}?" if hint else "")
                        + f" (allowed: {', '.join(allowed)})",
                    )
                    continue
                terms.append((var, scalar))
        else:
            reader.unknown_key(key_node, key, CONDITION_KEYS, "condition")
    return Condition(tuple(ranges), tuple(wildcards), tuple(terms))


def _parse_range(reader, var: str, bounds) -> tuple | None:
    low = high = None
    low_open = high_open = False
    for bound, bound_node, number in reader.mapping(bounds, f"ranges.{var}"):
        if bound not in RANGE_BOUNDS:
            reader.unknown_key(bound_node, bound, RANGE_BOUNDS, f"ranges.{var}")
            continue
        n = reader.number(number, f"ranges.{var}.{bound}")
        if n is None:
            continue
        if bound in ("gte", "gt"):
            low, low_open = n, bound == "gt"
        else:
            high, high_open = n, bound == "lt"
    if (
        low is not None
        and high is not None
        and (low > high or (low == high and (low_open or high_open)))
    ):
        reader.add(bounds, f"ranges.{var} is empty: no system can match")
    return (var, low, high, low_open, high_open)
