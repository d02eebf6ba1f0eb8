"""How to install an optional dependency, said for where the user stands.

``pip install 'trtllm-regress[torch]'`` was the advice everywhere, but no index serves
``trtllm-regress``: it failed with "No matching distribution found". Each extra is only a
third-party package, so that package's own ``pip install`` always works; from a source checkout
(the usual case) the editable install of the checkout's extra is given too, by its absolute path
so it works from any folder.
"""

from __future__ import annotations

from pathlib import Path

#: The pip requirement of each extra: what ``pip install`` needs outside a checkout. torch is pinned
#: to the CPU wheel the README installs first, so pip never reaches for a multi-GB CUDA build.
EXTRAS = {
    "torch": "torch==2.13.0",
    "plot": "matplotlib",
    "trtllm": "tensorrt_llm",
    # What `regress check` runs for real: upstream's Triton kernels (numpy for the interpreter) and
    # upstream's llm_args.py (pydantic, strenum).
    "check": "triton numpy pydantic StrEnum",
}


def checkout() -> Path | None:
    """The source checkout regress runs from (its ``pyproject.toml`` beside the package), or None."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install torch==2.13.0``, and in a checkout
    ``pip install -e '<checkout>[torch]'`` as the alternative."""
    direct = f"pip install {EXTRAS[extra]}"
    root = checkout()
    if root is None:
        return direct
    return f"{direct} (or, for the checkout: pip install -e '{root}[{extra}]')"
