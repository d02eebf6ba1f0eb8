"""What a TensorRT-LLM test needs (package, checkpoint, GPUs, architecture) and why it must skip."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from regress.install import install_hint

MODELS_ROOT_ENV = "LLM_MODELS_ROOT"
# Mirrors upstream tests' llm_models_root(): $LLM_MODELS_ROOT first, then the CI cluster mounts.
DEFAULT_FALLBACK_ROOTS: tuple[str, ...] = (
    "/home/scratch.trt_llm_data_ci/llm-models",
    "/scratch.trt_llm_data/llm-models",
)

HOPPER = 90
BLACKWELL = 100
#: The datacenter Blackwell parts (sm100 B200/GB200, sm103 B300/GB300). Upstream's
#: ``TestDeepSeekV32::test_fp8_blockscale`` switches to its Blackwell settings only when
#: ``get_sm_version`` reports exactly 100 or 103; SM120/121 keep the Hopper settings
#: (``tests/integration/defs/accuracy/test_llm_api_pytorch.py`` @ 000b1b9b). ``sm >= 100`` is not
#: that set.
SM100_FAMILY: tuple[int, ...] = (100, 103)
_ARCH_NAMES = {HOPPER: "Hopper", BLACKWELL: "Blackwell", 103: "Blackwell", 120: "Blackwell"}


def arch_name(sm: int) -> str:
    """``90 -> "Hopper (sm90)"``; other values print as ``smNN``."""
    name = _ARCH_NAMES.get(sm)
    return f"{name} (sm{sm})" if name else f"sm{sm}"


def in_sm100_family(sm: int | None) -> bool:
    """Whether ``sm`` is one of :data:`SM100_FAMILY` (None, not known, is not)."""
    return sm is not None and sm in SM100_FAMILY


@dataclass(frozen=True)
class Device:
    """One visible CUDA device: compute capability as ``major * 10 + minor``, memory in MiB."""

    sm: int
    memory_mib: int
    name: str = ""


@dataclass(frozen=True)
class Devices:
    """The visible CUDA devices, as the test process sees them (``CUDA_VISIBLE_DEVICES`` applied)."""

    devices: tuple[Device, ...] = ()
    error: str | None = None  # why the query failed, when it did

    @property
    def count(self) -> int:
        return len(self.devices)


DeviceQuery = Callable[[], Devices]
_SMI_QUERY = (
    "nvidia-smi",
    "--query-gpu=index,uuid,name,compute_cap,memory.total",
    "--format=csv,noheader,nounits",
)


def parse_smi_devices(text: str, visible: str | None) -> Devices | None:
    """Devices from ``nvidia-smi --query-gpu=index,uuid,name,compute_cap,memory.total``.

    ``visible`` is ``CUDA_VISIBLE_DEVICES`` (None: unset), applied the way the CUDA runtime does
    (``regress.ci.gpu``): indices or UUID prefixes, stopping at the first entry that selects
    nothing. Returns None when the output cannot be read (an old driver without ``compute_cap``)
    or a MIG device is selected, so the caller falls back to asking torch.
    """
    from regress.ci.gpu import parse_visible_devices

    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5:
            return None
        index, uuid, name, cap, memory = parts
        major, _, minor = cap.partition(".")
        try:
            rows.append((int(index), uuid, Device(int(major) * 10 + int(minor), int(memory), name)))
        except ValueError:
            return None
    tokens = parse_visible_devices(visible)
    if tokens is None:
        return Devices(tuple(device for _, _, device in sorted(rows, key=lambda r: r[0])))
    chosen = []
    for token in tokens:
        if token.startswith("MIG-"):
            return None
        match = [
            device
            for index, uuid, device in rows
            if (token.isdigit() and int(token) == index)
            or (token.startswith("GPU-") and uuid.startswith(token))
        ]
        if not match:
            break
        chosen.append(match[0])
    return Devices(tuple(chosen))


def _torch_devices() -> Devices:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a hard dependency of regress
        return Devices(error=f"torch is not importable: {exc}")
    try:
        if not torch.cuda.is_available():
            return Devices()
        found = []
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            found.append(
                Device(
                    sm=props.major * 10 + props.minor,
                    memory_mib=props.total_memory // (1 << 20),
                    name=props.name,
                )
            )
        return Devices(tuple(found))
    except RuntimeError as exc:  # a broken driver reads as "no usable GPU", with the cause
        return Devices(error=f"CUDA device query failed: {exc}")


def query_devices(
    run: Callable[[Sequence[str]], str | None] | None = None,
    env: Mapping[str, str] | None = None,
) -> Devices:
    """The visible devices; the default device-query seam.

    ``nvidia-smi`` first, because it creates no CUDA context in the test process (the engine's
    processes want the whole GPU, and a context made before ``CUDA_VISIBLE_DEVICES`` is pinned
    would see every GPU); torch only when ``nvidia-smi`` cannot say. A machine without CUDA
    reports zero devices rather than failing.

    Args:
        run: runs a command, returns its stdout or None (``regress.ci.gpu.run_command``).
        env: the environment (``CUDA_VISIBLE_DEVICES``); ``os.environ`` when None.
    """
    if run is None:
        from regress.ci.gpu import run_command as run
    env = os.environ if env is None else env
    text = run(_SMI_QUERY)
    if text is not None:
        devices = parse_smi_devices(text, env.get("CUDA_VISIBLE_DEVICES"))
        if devices is not None:
            return devices
    return _torch_devices()


@dataclass(frozen=True)
class Needs:
    """The requirements of one test (or one parametrised case).

    Attributes:
        checkpoint: directory name under the models root (``"DeepSeek-V3.2-Exp-hf"``), or None.
        gpus: how many visible GPUs the case needs.
        min_sm: oldest architecture allowed (``HOPPER`` = 90, ``BLACKWELL`` = 100), or None.
        min_memory_mib: per-device memory floor (upstream ``skip_less_device_memory``), or None.
        trtllm: whether ``tensorrt_llm`` must be importable.
        sms: the exact architectures allowed, or None for any at or above ``min_sm``; for a
            case about one architecture's code path (the SM90 vs SM100 MTP buffer sets).
    """

    checkpoint: str | None = None
    gpus: int = 1
    min_sm: int | None = None
    min_memory_mib: int | None = None
    trtllm: bool = True
    sms: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Unmet:
    """One unmet requirement: ``kind`` is trtllm, checkpoint, gpus, arch or memory."""

    kind: str
    reason: str


@dataclass
class Environment:
    """The seams the checks read; tests replace any of them.

    Attributes:
        env: environment variables (``LLM_MODELS_ROOT``).
        find_spec: ``importlib.util.find_spec``; it locates ``tensorrt_llm`` without importing it.
        devices: the device query, called at most once per check.
        fallback_roots: models roots tried after ``$LLM_MODELS_ROOT``.
    """

    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    find_spec: Callable[[str], object] = importlib.util.find_spec
    devices: DeviceQuery = query_devices
    fallback_roots: Sequence[str] = DEFAULT_FALLBACK_ROOTS


def missing_trtllm(environment: Environment | None = None) -> Unmet | None:
    """Is ``tensorrt_llm`` locatable? Never imports it (that would cost seconds and a CUDA init)."""
    environment = environment or Environment()
    try:
        spec = environment.find_spec("tensorrt_llm")
    except (ImportError, ValueError) as exc:
        spec, detail = None, f" ({exc})"
    else:
        detail = ""
    if spec is None:
        return Unmet(
            "trtllm",
            "needs tensorrt_llm, which is not importable here"
            + detail
            + f" ({install_hint('trtllm')}, or a TensorRT-LLM container)",
        )
    return None


def models_roots(environment: Environment | None = None) -> list[Path]:
    """The roots searched for checkpoints, in order."""
    environment = environment or Environment()
    roots = []
    if environment.env.get(MODELS_ROOT_ENV):
        roots.append(Path(environment.env[MODELS_ROOT_ENV]))
    roots.extend(Path(root) for root in environment.fallback_roots)
    return roots


def find_checkpoint(name: str, environment: Environment | None = None) -> Path | None:
    """The first ``<root>/<name>`` holding a ``config.json``, or None."""
    for root in models_roots(environment):
        candidate = root / name
        if (candidate / "config.json").is_file():
            return candidate
    return None


def missing_checkpoint(name: str, environment: Environment | None = None) -> Unmet | None:
    """Is checkpoint ``name`` present? The reason names every path looked at."""
    environment = environment or Environment()
    if find_checkpoint(name, environment) is not None:
        return None
    looked = [str(root / name) for root in models_roots(environment)]
    unset = "" if environment.env.get(MODELS_ROOT_ENV) else f"${MODELS_ROOT_ENV} is not set; "
    return Unmet(
        "checkpoint",
        f"needs checkpoint {name}: {unset}no config.json in "
        + ", ".join(looked)
        + f" (set ${MODELS_ROOT_ENV} to the directory holding {name})",
    )


def _describe(devices: Devices) -> str:
    if not devices.devices:
        return "no GPU" + (f": {devices.error}" if devices.error else "")
    sms = sorted({d.sm for d in devices.devices})
    names = sorted({d.name for d in devices.devices if d.name})
    return ", ".join(arch_name(sm) for sm in sms) + (f" ({', '.join(names)})" if names else "")


def device_unmet(needs: Needs, devices: Devices) -> list[Unmet]:
    """GPU count, architecture and memory checks against an already-queried device list."""
    unmet = []
    if devices.count < needs.gpus:
        detail = f": {devices.error}" if devices.error else ""
        plural = "" if needs.gpus == 1 else "s"
        unmet.append(Unmet("gpus", f"needs {needs.gpus} GPU{plural}, have {devices.count}{detail}"))
    used = devices.devices[: needs.gpus]
    if needs.min_sm is not None:
        too_old = [d for d in used if d.sm < needs.min_sm]
        if too_old or not used:
            unmet.append(
                Unmet(
                    "arch",
                    f"needs {arch_name(needs.min_sm)} or newer, have {_describe(devices)}",
                )
            )
    if needs.sms is not None:
        other = [d for d in used if d.sm not in needs.sms]
        if other or not used:
            wanted = " or ".join(arch_name(sm) for sm in needs.sms)
            unmet.append(Unmet("arch", f"needs {wanted} exactly, have {_describe(devices)}"))
    if needs.min_memory_mib is not None and used:
        small = min(d.memory_mib for d in used)
        if small < needs.min_memory_mib:
            unmet.append(
                Unmet(
                    "memory",
                    f"needs {needs.min_memory_mib} MiB per GPU, have {small} MiB",
                )
            )
    return unmet


def unmet(needs: Needs, environment: Environment | None = None) -> list[Unmet]:
    """Every unmet requirement of ``needs``, cheapest check first (package, checkpoint, devices)."""
    environment = environment or Environment()
    found: list[Unmet] = []
    if needs.trtllm and (missing := missing_trtllm(environment)) is not None:
        found.append(missing)
    if needs.checkpoint and (missing := missing_checkpoint(needs.checkpoint, environment)):
        found.append(missing)
    if needs.gpus > 0 or needs.min_sm is not None or needs.sms is not None:
        found.extend(device_unmet(needs, environment.devices()))
    return found


def skip_reason(needs: Needs, environment: Environment | None = None) -> str | None:
    """One line for ``pytest.skip``: every unmet requirement, or None when the test can run."""
    reasons = unmet(needs, environment)
    return "; ".join(u.reason for u in reasons) if reasons else None
