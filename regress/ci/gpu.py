"""CUDA device discovery without importing torch, and one-GPU-per-xdist-worker pinning.

Counting devices must be cheap and must not create a CUDA context: the pytest plugin does it at
collection time in every xdist worker, and a worker that touched CUDA before its
``CUDA_VISIBLE_DEVICES`` was pinned would see every GPU. So the order is: the environment
(``CUDA_VISIBLE_DEVICES=""`` proves there are none), then ``nvidia-smi -L`` (one subprocess, no
CUDA context), then the driver's ``/proc`` entry (no driver, no GPU), and only then
``torch.cuda.device_count()`` as the last resort (a container with a driver but no nvidia-smi).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The one seam to subprocesses in this module: tests replace it. Returns stdout, or None when the
# program is missing or fails (both mean "nvidia-smi cannot tell us").
RunCommand = Callable[[Sequence[str]], "str | None"]

DRIVER_GPUS_DIR = Path("/proc/driver/nvidia/gpus")
_GPU_LINE = re.compile(
    r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>GPU-[0-9A-Fa-f-]+)\)\s*$"
)
_MIG_LINE = re.compile(r"^\s+MIG .+\(UUID: (?P<uuid>MIG-[0-9A-Za-z/-]+)\)\s*$")
_XDIST_WORKER = re.compile(r"^gw(?P<n>\d+)$")


@dataclass(frozen=True)
class PhysicalGpu:
    """One line of ``nvidia-smi -L``: a GPU and the MIG devices carved out of it."""

    index: int
    name: str
    uuid: str
    mig_uuids: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceProbe:
    """What this process can see: how many CUDA devices, their names, and how we know.

    Attributes:
        count: CUDA devices this process would get from ``torch.cuda.device_count()``.
        names: their product names (e.g. ``"NVIDIA H200"``), when known.
        source: a human explanation used verbatim in skip reasons and errors.
    """

    count: int
    names: tuple[str, ...]
    source: str


def run_command(argv: Sequence[str]) -> str | None:
    """Run a short diagnostic command; ``None`` if it is missing, fails or hangs."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_visible_devices(value: str | None) -> list[str] | None:
    """Parse ``CUDA_VISIBLE_DEVICES`` the way the CUDA runtime does.

    ``None`` means unset (every device is visible). The runtime stops at the first invalid entry,
    so ``"0,-1,1"`` exposes only device 0 and ``"-1"`` or ``""`` expose nothing.
    """
    if value is None:
        return None
    visible: list[str] = []
    for raw in value.split(","):
        token = raw.strip()
        if re.fullmatch(r"\d+", token) or re.fullmatch(r"(GPU|MIG)-[0-9A-Za-z/-]+", token):
            visible.append(token)
        else:
            break
    return visible


def parse_nvidia_smi_list(text: str) -> list[PhysicalGpu]:
    """Parse ``nvidia-smi -L``: ``GPU 0: NVIDIA H200 (UUID: GPU-...)`` plus indented MIG lines."""
    gpus: list[PhysicalGpu] = []
    for line in text.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            gpus.append(PhysicalGpu(int(gpu["index"]), gpu["name"], gpu["uuid"]))
            continue
        mig = _MIG_LINE.match(line)
        if mig and gpus:
            last = gpus[-1]
            gpus[-1] = PhysicalGpu(last.index, last.name, last.uuid, (*last.mig_uuids, mig["uuid"]))
    return gpus


def _resolve(visible: list[str], gpus: list[PhysicalGpu]) -> list[PhysicalGpu]:
    """The GPUs a ``CUDA_VISIBLE_DEVICES`` list selects; stops at the first unknown entry, like CUDA."""
    chosen: list[PhysicalGpu] = []
    for token in visible:
        match = None
        for gpu in gpus:
            if (
                (token.isdigit() and int(token) == gpu.index)
                or (token.startswith("GPU-") and gpu.uuid.startswith(token))
                or (token.startswith("MIG-") and any(m.startswith(token) for m in gpu.mig_uuids))
            ):
                match = gpu
            if match:
                break
        if match is None:
            break
        chosen.append(match)
    return chosen


def probe_devices(
    env: Mapping[str, str] | None = None,
    *,
    run: RunCommand = run_command,
    driver_dir: Path = DRIVER_GPUS_DIR,
) -> DeviceProbe:
    """Count the CUDA devices this process can use, touching torch only as a last resort.

    Args:
        env: the environment to read ``CUDA_VISIBLE_DEVICES`` from (default ``os.environ``).
        run: runs ``nvidia-smi``; replaced in tests.
        driver_dir: the driver's per-GPU ``/proc`` directory; its absence proves there is no GPU.
    """
    env = os.environ if env is None else env
    visible = parse_visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    if visible == []:
        raw = env.get("CUDA_VISIBLE_DEVICES", "")
        return DeviceProbe(0, (), f"CUDA_VISIBLE_DEVICES={raw!r} hides every device")
    listing = run(["nvidia-smi", "-L"])
    if listing is not None:
        gpus = parse_nvidia_smi_list(listing)
        chosen = gpus if visible is None else _resolve(visible, gpus)
        where = "nvidia-smi -L" if visible is None else "nvidia-smi -L and CUDA_VISIBLE_DEVICES"
        return DeviceProbe(len(chosen), tuple(g.name for g in chosen), where)
    if not driver_dir.is_dir():
        return DeviceProbe(
            0, (), f"no NVIDIA driver: nvidia-smi is not runnable and {driver_dir} is missing"
        )
    try:
        import torch  # last resort: a driver is loaded but nvidia-smi is absent
    except ImportError:
        return DeviceProbe(0, (), "nvidia-smi is not runnable and torch is not installed")
    count = int(torch.cuda.device_count())
    return DeviceProbe(count, (), "torch.cuda.device_count() (nvidia-smi is not runnable)")


def worker_index(env: Mapping[str, str] | None = None) -> int | None:
    """The xdist worker number from ``PYTEST_XDIST_WORKER`` (``gw3`` -> 3), or ``None``."""
    env = os.environ if env is None else env
    match = _XDIST_WORKER.match(env.get("PYTEST_XDIST_WORKER", ""))
    return int(match["n"]) if match else None


def pin_worker(
    env: MutableMapping[str, str] | None = None, *, run: RunCommand = run_command
) -> str | None:
    """Give this xdist worker one GPU by rewriting ``CUDA_VISIBLE_DEVICES`` before CUDA starts.

    The device is taken from the caller's visible list (``CUDA_VISIBLE_DEVICES`` if set, else
    every GPU ``nvidia-smi`` lists) by worker number, round robin when there are more workers
    than GPUs. Idempotent: once pinned the visible list has one entry, so a second call (pytester,
    re-configuration) picks the same device.

    Returns:
        The device token this worker now sees, or ``None`` when not a worker or nothing is visible.
    """
    env = os.environ if env is None else env
    index = worker_index(env)
    if index is None:
        return None
    visible = parse_visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    if visible is None:
        listing = run(["nvidia-smi", "-L"])
        visible = [str(g.index) for g in parse_nvidia_smi_list(listing or "")]
    if not visible:
        return None
    chosen = visible[index % len(visible)]
    env["CUDA_VISIBLE_DEVICES"] = chosen
    return chosen
