"""Drive upstream's layer-wise benchmark runner on a DSA model, one child process per configuration.

What each GEN pack must look like is judged in :mod:`regress.trtllm.shapes`.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.errors import MissingDependencyError, UsageError
from regress.processes import run_child
from regress.trtllm.shapes import ShapeResult, check_metadata, find_deepgemm_assertion, metadata_of

#: The ``python -m`` entry point of the child process (a CLI module).
CHILD = "regress.cli.child"

# Bug 2 (fixed by NVIDIA/TensorRT-LLM PR #17247): Runner.create_run_pack (tensorrt_llm/tools/layer_wise_benchmarks/
# runner.py) never announced seq_len_q > 1 GEN packs to the attention metadata, so DSA's
# kv_lens_cuda_2d stayed one column wide and DeepGEMM aborted. The fix must stay confined to DSA:
# non-DSA metadata keeps max_total_draft_tokens unset. A DeepGEMM host assertion may kill the
# process, so each configuration runs in a child process (python -m regress.cli.child layerwise)
# that writes one JSON line per result as it goes.
# Checked: runner.py @ 020cbd8a (no announcement yet) has Runner.__init__ with exactly the keyword
# set passed below, create_run_pack(run_type, *, batch_size, request_id_begin, seq_len_q,
# seq_len_kv_cache, kv_cache_manager, attn_workspace=None) returning a run_pack closure over
# attn_metadata, and the static create_mapping / create_kv_cache_manager; the guarded version
# (PR #17247, https://github.com/NVIDIA/TensorRT-LLM/pull/17247) is the newest stored version of
# tensorrt_llm/tools/layer_wise_benchmarks/runner.py, commit unknown.


def _accepted(func: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments ``func`` takes; the runner's signature changed across releases."""
    params = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def _runner_class(model: str) -> Any:
    """``Runner`` (newer releases) or ``get_runner_cls(model)`` (older ones).

    Checked: ``layer_wise_benchmarks/__init__.py`` @ 38296a47 exports ``Runner``; the older
    ``get_runner_cls`` is defined in ``runner_factory.py`` @ 1008984a and imported from the
    package by ``examples/layer_wise_benchmarks/run.py`` @ 042f3c05.
    """
    try:
        from tensorrt_llm.tools.layer_wise_benchmarks.runner import Runner
    except ImportError:
        try:
            from tensorrt_llm.tools.layer_wise_benchmarks import get_runner_cls
        except ImportError as exc:
            raise MissingDependencyError(
                f"The layer-wise shape check drives tensorrt_llm.tools.layer_wise_benchmarks, "
                f"which is not importable ({exc}); run it where TensorRT-LLM is installed."
            ) from exc
        return get_runner_cls(model)
    return Runner


@dataclass(frozen=True)
class ShapeCheck:
    """One layer-wise configuration: a model, a backend label and the GEN packs to build."""

    model: str
    backend: str = "dsa"
    batch_size: int = 32
    seq_len_q: tuple[int, ...] = (1, 4)
    seq_len_kv_cache: int = 2049  # past index_topk=2048, so the indexer really selects
    layer_indices: tuple[int, ...] = (1,)
    tokens_per_block: int = 64  # DSA's indexer cache needs 64 (upstream passes it for V3.2)
    moe_backend: str = "CUTLASS"
    load_format: str = "DUMMY"

    def argv(self) -> list[str]:
        """The check as child-process flags (``--batch-size 32``); :meth:`from_argv` reads them."""
        out = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out += [
                _flag(f.name),
                ",".join(map(str, value)) if isinstance(value, tuple) else str(value),
            ]
        return out

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> ShapeCheck:
        """The check :meth:`argv` describes; flags left out keep their defaults.

        Raises:
            UsageError: not flag/value pairs of known flags, a value of the wrong type, no model.
        """
        fields = {_flag(f.name): f for f in dataclasses.fields(cls)}
        if len(argv) % 2 or any(flag not in fields for flag in argv[::2]) or "--model" not in argv:
            raise UsageError(f"give --model and flag/value pairs of {', '.join(fields)}: {argv}")
        kwargs: dict[str, Any] = {}
        for flag, text in zip(argv[::2], argv[1::2], strict=True):
            kind = str(fields[flag].type)
            try:
                kwargs[fields[flag].name] = (
                    tuple(int(x) for x in text.split(","))
                    if kind.startswith("tuple")
                    else int(text)
                    if kind == "int"
                    else text
                )
            except ValueError as exc:
                raise UsageError(f"{flag} {text!r}: {exc}") from exc
        return cls(**kwargs)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def run_in_process(check: ShapeCheck, emit: Callable[[ShapeResult], None]) -> None:
    """Build upstream's runner and one GEN pack per ``seq_len_q``; needs TensorRT-LLM and a GPU."""
    runner_cls = _runner_class(check.model)  # first: no CUDA touched when TensorRT-LLM is absent
    import torch

    torch.cuda.set_device(0)
    max_q = max(check.seq_len_q)
    max_seq_len = check.seq_len_kv_cache + max_q
    mapping = runner_cls.create_mapping(enable_attention_dp=False)
    kv_cache_manager = runner_cls.create_kv_cache_manager(
        check.model,
        mapping,
        **_accepted(
            runner_cls.create_kv_cache_manager,
            {
                "tokens_per_block": check.tokens_per_block,
                "max_batch_size": check.batch_size,
                "max_seq_len": max_seq_len,
                "kv_cache_dtype": "auto",
                "mamba_ssm_cache_dtype": "auto",
                "layer_indices": list(check.layer_indices),
            },
        ),
    )
    runner = runner_cls(
        check.model,
        mapping,
        **_accepted(
            runner_cls.__init__,
            {
                "load_format": check.load_format,
                "moe_backend": check.moe_backend,
                "layer_indices": list(check.layer_indices),
                "scaled_from": None,
                "max_seq_len": max_seq_len,
                "max_num_tokens": check.batch_size * max_q,
                "moe_max_num_tokens": None,
                "kv_cache_dtype": "auto",
                "mamba_ssm_cache_dtype": "auto",
                "use_low_precision_moe_combine": False,
                "use_cuda_graph": False,
            },
        ),
    )
    workspace = torch.empty((0,), device="cuda", dtype=torch.int8)
    major, minor = torch.cuda.get_device_capability(0)
    for seq_len_q in check.seq_len_q:
        result = ShapeResult(check.backend, check.batch_size, seq_len_q, sm=major * 10 + minor)
        try:
            pack = runner.create_run_pack(
                "GEN",
                **_accepted(
                    runner.create_run_pack,
                    {
                        "batch_size": check.batch_size,
                        "request_id_begin": 0,
                        "seq_len_q": seq_len_q,
                        "seq_len_kv_cache": check.seq_len_kv_cache,
                        "kv_cache_manager": kv_cache_manager,
                        "attn_workspace": workspace,
                    },
                ),
            )
            metadata = metadata_of(pack)
            if metadata is not None:
                check_metadata(metadata, result)
            else:
                result.error = "could not find the pack's attention metadata in its closure"
            pack()
            torch.cuda.synchronize()
            result.ran = True
        except Exception as exc:  # classify, keep going with the next seq_len_q
            text = f"{type(exc).__name__}: {exc}"
            result.deepgemm_assertion = find_deepgemm_assertion(text)
            if result.deepgemm_assertion is None:
                result.error = text
        emit(result)


def run_to_file(check: ShapeCheck, out: Path) -> bool:
    """Run ``check`` in this process, appending one JSON line per result to ``out``.

    Each line is written as its result is known, so a DeepGEMM abort later in the run loses
    nothing already measured. Returns whether every result was ok.
    """
    out = Path(out)
    failed = False

    def emit(result: ShapeResult) -> None:
        nonlocal failed
        failed = failed or not result.ok
        with out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(result.to_dict(), default=repr) + "\n")

    run_in_process(check, emit)
    return not failed


Spawn = Callable[..., subprocess.CompletedProcess]


def run_in_subprocess(
    check: ShapeCheck,
    out: Path,
    *,
    timeout: float = 1800,
    spawn: Spawn = run_child,  # its own process group, ended with regress
    python: str = sys.executable,
) -> list[ShapeResult]:
    """Run ``check`` in a child process; a child killed by DeepGEMM still yields results.

    Every requested ``seq_len_q`` gets a result: those the child wrote, and for the rest a
    failure classified from the child's output (the DeepGEMM signature, else the exit status).
    """
    out = Path(out)
    out.unlink(missing_ok=True)
    proc = spawn(
        [python, "-m", CHILD, "layerwise", *check.argv(), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    written = {}
    if out.exists():
        for line in out.read_text(encoding="utf-8").splitlines():
            if line.strip():
                result = ShapeResult.from_dict(json.loads(line))
                written[result.seq_len_q] = result
    output = f"{proc.stdout or ''}\n{proc.stderr or ''}"
    tail = "\n".join(output.strip().splitlines()[-20:])
    results = []
    for seq_len_q in check.seq_len_q:
        if seq_len_q in written:
            results.append(written[seq_len_q])
            continue
        assertion = find_deepgemm_assertion(output)
        results.append(
            ShapeResult(
                check.backend,
                check.batch_size,
                seq_len_q,
                deepgemm_assertion=assertion,
                error=None if assertion else f"child exited {proc.returncode}:\n{tail}",
            )
        )
    return results
