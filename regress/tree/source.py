"""Where the DSA metadata, its base classes and the MTP draft loop live in a TensorRT-LLM tree.

The one detection rule (:func:`resolve_source_tree`) over the one era table
(:data:`regress.tree.eras.ERAS`): ``regress check``, the bisect recipes and the installed-package
hooks (:mod:`regress.trtllm.paths`) all ask here, so a tree gets one era whoever asks. Resolution
reads files only: it never imports ``tensorrt_llm``, which a checkout at an old commit may not even
be able to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from regress.errors import EngineError, UsageError
from regress.tree.eras import ERAS, Era

DSA_METADATA_CLASS = "DSAtrtllmAttentionMetadata"
ATTENTION_METADATA_CLASS = "AttentionMetadata"
TRTLLM_METADATA_CLASS = "TrtllmAttentionMetadata"


class SourceTreeError(UsageError):
    """The directory is not a TensorRT-LLM tree regress knows, or it has no DSA metadata."""


class UnreadableSourceError(EngineError):
    """A file the tree's layout names is there but is not Python text (binary, cut, another
    encoding): no verdict is possible on it, so the check is a gap naming the file (exit 3),
    never "not a tree" (exit 2), which would tell a bisect the commit predates DSA."""


# The draft loop: first MTPEagleWorker.forward in mtp.py, later Eagle3OneModelWorker in eagle3.py
# with MTPEagleWorker reduced to a thin subclass of it. Checked: eagle3.py's worker defines
# _prepare/_restore_attn_metadata_from_spec_dec (the newest stored version of
# tensorrt_llm/_torch/speculative/interface.py, commit unknown, names them); the mtp.py
# subclass relationship was read once (era C's mtp.py), not re-read for docs/upstream-symbols.md.
_MTP_FILE = "_torch/speculative/mtp.py"
_EAGLE3_FILE = "_torch/speculative/eagle3.py"


@dataclass(frozen=True)
class Location:
    """A class (or method) in a file, with the dotted module name that imports it."""

    module: str
    file: Path
    qualname: str

    def __str__(self) -> str:
        return f"{self.module}::{self.qualname} ({self.file})"


@dataclass(frozen=True)
class SourceTree:
    """Everything regress hooks, resolved for one tree.

    Attributes:
        era: its :class:`~regress.tree.eras.Era` (the per-era facts travel with the tree).
        package_dir: the ``tensorrt_llm`` package directory.
        dsa_metadata: where ``DSAtrtllmAttentionMetadata`` is defined.
        attention_metadata: the base ``AttentionMetadata`` (``interface.py``).
        trtllm_metadata: ``TrtllmAttentionMetadata`` (``trtllm.py``).
        draft_loop: the method running the one-model MTP-Eagle draft loop, or None when neither
            known worker is present (a tree older than one-model MTP).
        reexported_from: modules that re-export the DSA class (era B/C package ``__init__``).
    """

    era: Era
    package_dir: Path
    dsa_metadata: Location
    attention_metadata: Location
    trtllm_metadata: Location
    draft_loop: Location | None
    reexported_from: tuple[str, ...] = field(default=())

    @property
    def dsa_module_names(self) -> tuple[str, ...]:
        """Every module name under which the DSA class can be imported (definition first)."""
        return (self.dsa_metadata.module, *self.reexported_from)


def module_name(package_dir: Path, file: Path) -> str:
    """The dotted name that imports ``file`` of the tree whose package is ``package_dir``."""
    rel = file.relative_to(package_dir.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _defines_class(file: Path, class_name: str) -> bool:
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(rf"^class\s+{re.escape(class_name)}\b", text, re.MULTILINE) is not None


def _refuse_unreadable(file: Path) -> None:
    """Raise :class:`UnreadableSourceError` when ``file`` exists but is not UTF-8 Python text."""
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UnreadableSourceError(
            f"{file} cannot be read ({exc.strerror}): no verdict on this tree; fix its "
            "permissions or check another commit (a bisect skips this one)"
        ) from exc
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        bad = True
    else:
        bad = b"\0" in data
    if bad:
        raise UnreadableSourceError(
            f"{file} is not Python source (binary or not UTF-8): no verdict on this tree; "
            "restore the file or check another commit (a bisect skips this one)"
        )


def _class_bases(file: Path, class_name: str) -> str | None:
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(rf"^class\s+{re.escape(class_name)}\s*\(([^)]*)\)", text, re.MULTILINE)
    return match.group(1) if match else None


def package_dir_of(root: Path | str) -> Path:
    """Accept a checkout root (holding ``tensorrt_llm/``) or the package directory itself."""
    if str(root) == "":
        raise SourceTreeError(
            "the TensorRT-LLM tree path is empty: give the checkout root (the folder that holds "
            "tensorrt_llm/)"
        )
    root = Path(root)
    if not root.exists():
        raise SourceTreeError(
            f"{root} does not exist: give the path of a TensorRT-LLM checkout (the folder that "
            "holds tensorrt_llm/)"
        )
    if not root.is_dir():
        raise SourceTreeError(
            f"{root} is a file, not a folder: give the TensorRT-LLM checkout root (the folder "
            "that holds tensorrt_llm/)"
        )
    if (root / "tensorrt_llm" / "__init__.py").is_file():
        return root / "tensorrt_llm"
    if root.name == "tensorrt_llm" and (root / "__init__.py").is_file():
        return root
    raise SourceTreeError(
        f"{root} is not a TensorRT-LLM tree: neither {root / 'tensorrt_llm' / '__init__.py'} nor "
        f"{root / '__init__.py'} (with {root} named 'tensorrt_llm') exists. Pass the checkout "
        "root or the tensorrt_llm package directory."
    )


def _locate_base(package_dir: Path, backends: str, stem: str, class_name: str) -> Location:
    file = package_dir / backends / f"{stem}.py"
    if not _defines_class(file, class_name):
        raise SourceTreeError(
            f"{class_name} is not defined in {file}; this TensorRT-LLM tree has a layout regress "
            "does not know. Update regress.tree.eras.ERAS."
        )
    return Location(module_name(package_dir, file), file, class_name)


def _locate_draft_loop(package_dir: Path) -> Location | None:
    mtp = package_dir / _MTP_FILE
    eagle3 = package_dir / _EAGLE3_FILE
    bases = _class_bases(mtp, "MTPEagleWorker")
    if bases is not None and "Eagle3OneModelWorker" not in bases:
        return Location(module_name(package_dir, mtp), mtp, "MTPEagleWorker.forward")
    if _defines_class(eagle3, "Eagle3OneModelWorker"):
        return Location(module_name(package_dir, eagle3), eagle3, "Eagle3OneModelWorker.forward")
    return None


def resolve_source_tree(root: Path | str) -> SourceTree:
    """Resolve the tree of a source checkout or an installed package directory by reading files.

    Args:
        root: the checkout root (it holds ``tensorrt_llm/``) or the ``tensorrt_llm`` directory.

    Raises:
        SourceTreeError: naming every path tried, when no known era matches (for instance a
            commit from before DSA existed; a bisect should treat that commit as untestable).
    """
    package_dir = package_dir_of(root)
    tried: list[str] = []
    hints: list[str] = []
    for era in ERAS:
        file = package_dir / era.dsa_metadata
        tried.append(str(file))
        if era.package_init is not None and not (package_dir / era.package_init).is_file():
            if _defines_class(file, DSA_METADATA_CLASS):  # the class is there, its package not
                hints.append(
                    f" {file} defines it, but era {era.name} loads it through its package and "
                    f"{package_dir / era.package_init} is missing: restore that file."
                )
            continue
        if not _defines_class(file, DSA_METADATA_CLASS):
            _refuse_unreadable(file)
            continue
        reexports: tuple[str, ...] = ()
        if era.package_init is not None:
            init = package_dir / era.package_init
            if DSA_METADATA_CLASS in init.read_text(encoding="utf-8", errors="replace"):
                reexports = (module_name(package_dir, init),)
        return SourceTree(
            era=era,
            package_dir=package_dir,
            dsa_metadata=Location(module_name(package_dir, file), file, DSA_METADATA_CLASS),
            attention_metadata=_locate_base(
                package_dir, era.backends, "interface", ATTENTION_METADATA_CLASS
            ),
            trtllm_metadata=_locate_base(
                package_dir, era.backends, "trtllm", TRTLLM_METADATA_CLASS
            ),
            draft_loop=_locate_draft_loop(package_dir),
            reexported_from=reexports,
        )
    raise SourceTreeError(
        f"No {DSA_METADATA_CLASS} found under {package_dir}. Tried (newest era first): "
        + ", ".join(tried)
        + "."
        + (
            "".join(hints)
            if hints
            else " The tree predates DSA or moved it again; mark this "
            "commit as skipped or extend regress.tree.eras.ERAS."
        )
    )
