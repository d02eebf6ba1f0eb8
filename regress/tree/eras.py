"""The one era table of regress: where each piece of a TensorRT-LLM tree is, and what runs for real.

The code moved twice (the table below), so whatever hooks the DSA
metadata must resolve its module per commit. Each :class:`Era` carries every per-era fact regress
uses (where the DSA class and its base classes are, which modules the sandbox executes from
source), so an era added to :data:`ERAS` without its facts fails when the table is defined, not on
the first real tree of that era. Detection is :func:`regress.tree.source.resolve_source_tree`.

| era | class ``DSAtrtllmAttentionMetadata`` in | base classes in |
|---|---|---|
| A | ``_torch/attention_backend/sparse/dsa.py`` | ``_torch/attention_backend/`` |
| B | ``_torch/attention_backend/sparse/dsa/metadata.py`` | same as A |
| C | ``_torch/attention/backends/sparse/dsa/metadata.py`` | ``_torch/attention/backends/`` |

Checked against NVIDIA/TensorRT-LLM (see ``docs/upstream-symbols.md``): era A ``sparse/dsa.py``
@ 00e3c1a5, era B ``sparse/dsa/metadata.py`` @ e5c90626 (with ``indexer.py``, ``trtllm.py`` and
``interface.py``), era C ``sparse/dsa/metadata.py`` @ d3d4066f with ``interface.py`` @ 1262edbc
and ``trtllm.py`` @ 017aa0ca (the files ``benchmarks/upstream.md`` ran). Which modules must run
for real was found by running those files on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The placeholders a module pattern of :attr:`Era.real` may use.
_FIELDS = ("backends", "dsa", "dsa_dir")

#: Executed from source when present, in every era (later era B and C build metadata from them).
OPTIONAL_REAL: tuple[str, ...] = ("{dsa_dir}/params.py", "{backends}/sparse/params.py")

#: The layer-wise runner of bug 2 (``Runner.create_run_pack``), loaded only by its scenario.
RUNNER = "tools/layer_wise_benchmarks/runner.py"

#: The one-model speculative workers' modules (relative to ``tensorrt_llm/``), executed from source
#: when present so that ``regress check`` drives upstream's own draft loop
#: (:mod:`regress.sandbox.workers`); ``interface.py`` holds ``SpecWorkerBase``.
CALLER_FILES: tuple[str, ...] = (
    "_torch/speculative/interface.py",
    "_torch/speculative/eagle3.py",
    "_torch/speculative/mtp.py",
    "_torch/speculative/draft_target.py",
)


@dataclass(frozen=True)
class Era:
    """One historical layout, paths relative to the ``tensorrt_llm`` directory.

    Attributes:
        name: ``"A"``, ``"B"`` or ``"C"`` (the letter reports and ``REGRESS_DSA_ERA`` carry).
        dsa_metadata: the file defining ``DSAtrtllmAttentionMetadata``.
        backends: the directory of the base classes (``interface.py``, ``trtllm.py``).
        real: the modules the sandbox executes from source, as patterns over ``{backends}``,
            ``{dsa}`` (the DSA file) and ``{dsa_dir}`` (its directory); required, so that an era
            cannot be added without saying what runs.
        package_init: era B/C: the package ``__init__`` that re-exports the DSA class.
    """

    name: str
    dsa_metadata: str
    backends: str
    real: tuple[str, ...]
    package_init: str | None = None

    def __post_init__(self) -> None:
        if "{dsa}" not in self.real:
            raise ValueError(f"era {self.name}: real must list the DSA module '{{dsa}}'")
        for pattern in (*self.real, *OPTIONAL_REAL):
            try:
                pattern.format(**dict.fromkeys(_FIELDS, "x"))
            except (KeyError, IndexError) as exc:
                raise ValueError(
                    f"era {self.name}: module pattern {pattern!r} uses an unknown field {exc}; "
                    f"use {', '.join('{' + f + '}' for f in _FIELDS)}"
                ) from None

    @property
    def dsa_dir(self) -> str:
        return self.dsa_metadata.rsplit("/", 1)[0]

    def files(self, patterns: tuple[str, ...]) -> list[str]:
        """``patterns`` (of :attr:`real` or :data:`OPTIONAL_REAL`) as paths in this era."""
        fields = {"backends": self.backends, "dsa": self.dsa_metadata, "dsa_dir": self.dsa_dir}
        return [p.format(**fields) for p in patterns]


_BASES = ("{backends}/interface.py", "{backends}/trtllm.py")

#: Newest first: a tree is matched against the newest layout it satisfies.
ERAS: tuple[Era, ...] = (
    Era(
        "C",
        "_torch/attention/backends/sparse/dsa/metadata.py",
        "_torch/attention/backends",
        real=(*_BASES, "{dsa_dir}/indexer.py", "{dsa}"),
        package_init="_torch/attention/backends/sparse/dsa/__init__.py",
    ),
    Era(
        "B",
        "_torch/attention_backend/sparse/dsa/metadata.py",
        "_torch/attention_backend",
        real=(*_BASES, "{dsa_dir}/indexer.py", "{dsa}"),
        package_init="_torch/attention_backend/sparse/dsa/__init__.py",
    ),
    Era(
        "A",
        "_torch/attention_backend/sparse/dsa.py",
        "_torch/attention_backend",
        real=(*_BASES, "{dsa}"),
    ),
)


def dotted(rel: str) -> str:
    """``_torch/x/y.py`` (relative to ``tensorrt_llm/``) as ``tensorrt_llm._torch.x.y``."""
    return "tensorrt_llm." + rel.removesuffix(".py").replace("/", ".")
