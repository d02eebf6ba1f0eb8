"""CUDA device discovery and per-worker pinning, with nvidia-smi and /proc replaced by fakes."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regress.ci import gpu

SMI = """GPU 0: NVIDIA H200 (UUID: GPU-11111111-aaaa-bbbb-cccc-000000000000)
GPU 1: NVIDIA H200 (UUID: GPU-22222222-aaaa-bbbb-cccc-000000000000)
  MIG 1g.18gb     Device  0: (UUID: MIG-33333333-aaaa-bbbb-cccc-000000000000)
GPU 2: NVIDIA B200 (UUID: GPU-44444444-aaaa-bbbb-cccc-000000000000)
"""


def smi(text: str | None):
    calls: list[list[str]] = []

    def run(argv):
        calls.append(list(argv))
        return text

    run.calls = calls
    return run


@pytest.fixture
def no_driver(tmp_path):
    return tmp_path / "no-such-dir"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", []),
        ("-1", []),
        ("0,1", ["0", "1"]),
        (" 2 , 3 ", ["2", "3"]),
        ("0,-1,1", ["0"]),  # CUDA stops at the first invalid entry
        ("GPU-1234,1", ["GPU-1234", "1"]),
        ("x", []),
    ],
)
def test_parse_visible_devices_follows_cuda_semantics(value, expected):
    assert gpu.parse_visible_devices(value) == expected


def test_parse_nvidia_smi_list_reads_gpus_and_mig_devices():
    gpus = gpu.parse_nvidia_smi_list(SMI)
    assert [(g.index, g.name) for g in gpus] == [
        (0, "NVIDIA H200"),
        (1, "NVIDIA H200"),
        (2, "NVIDIA B200"),
    ]
    assert gpus[1].mig_uuids == ("MIG-33333333-aaaa-bbbb-cccc-000000000000",)


def test_empty_visible_list_means_zero_without_running_anything(no_driver):
    run = smi(SMI)
    probe = gpu.probe_devices({"CUDA_VISIBLE_DEVICES": ""}, run=run, driver_dir=no_driver)
    assert probe.count == 0
    assert "hides every device" in probe.source
    assert run.calls == []


def test_nvidia_smi_counts_every_gpu_when_nothing_is_hidden(no_driver):
    probe = gpu.probe_devices({}, run=smi(SMI), driver_dir=no_driver)
    assert probe.count == 3
    assert probe.names == ("NVIDIA H200", "NVIDIA H200", "NVIDIA B200")


@pytest.mark.parametrize(
    ("visible", "count"),
    [
        ("2", 1),
        ("0,2", 2),
        ("GPU-4444", 1),  # UUID prefixes work, as in CUDA
        ("MIG-3333", 1),
        ("7", 0),  # no such GPU
        ("0,7,1", 1),  # CUDA stops at the first unknown device
    ],
)
def test_visible_devices_are_resolved_against_nvidia_smi(visible, count, no_driver):
    probe = gpu.probe_devices({"CUDA_VISIBLE_DEVICES": visible}, run=smi(SMI), driver_dir=no_driver)
    assert probe.count == count


def test_no_nvidia_smi_and_no_driver_means_zero_without_torch(no_driver, monkeypatch):
    # The defect this guards against: importing torch (and initialising CUDA) just to learn
    # there is no GPU. A poisoned torch module proves it is never touched.
    monkeypatch.setitem(sys.modules, "torch", None)
    probe = gpu.probe_devices({"CUDA_VISIBLE_DEVICES": "0"}, run=smi(None), driver_dir=no_driver)
    assert probe.count == 0
    assert "no NVIDIA driver" in probe.source


def test_torch_is_the_last_resort_when_a_driver_exists_without_nvidia_smi(tmp_path, monkeypatch):
    class FakeCuda:
        @staticmethod
        def device_count():
            return 2

    class FakeTorch:
        cuda = FakeCuda

    monkeypatch.setitem(sys.modules, "torch", FakeTorch)
    probe = gpu.probe_devices({}, run=smi(None), driver_dir=tmp_path)
    assert probe.count == 2
    assert "torch" in probe.source


def test_driver_without_nvidia_smi_or_torch_reports_zero(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    probe = gpu.probe_devices({}, run=smi(None), driver_dir=tmp_path)
    assert probe.count == 0


@pytest.mark.parametrize(
    ("worker", "index"), [("gw0", 0), ("gw12", 12), ("", None), ("master", None)]
)
def test_worker_index(worker, index):
    assert gpu.worker_index({"PYTEST_XDIST_WORKER": worker}) == index


def test_pin_worker_takes_its_device_from_the_callers_list():
    env = {"PYTEST_XDIST_WORKER": "gw1", "CUDA_VISIBLE_DEVICES": "3,5,7"}
    assert gpu.pin_worker(env, run=smi(None)) == "5"
    assert env["CUDA_VISIBLE_DEVICES"] == "5"


def test_pin_worker_is_idempotent():
    env = {"PYTEST_XDIST_WORKER": "gw2", "CUDA_VISIBLE_DEVICES": "3,5,7"}
    first = gpu.pin_worker(env, run=smi(None))
    assert gpu.pin_worker(env, run=smi(None)) == first == "7"


def test_pin_worker_round_robins_when_workers_outnumber_gpus():
    env = {"PYTEST_XDIST_WORKER": "gw3", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert gpu.pin_worker(env, run=smi(None)) == "1"


def test_pin_worker_lists_gpus_when_nothing_is_hidden():
    env = {"PYTEST_XDIST_WORKER": "gw2"}
    assert gpu.pin_worker(env, run=smi(SMI)) == "2"


@pytest.mark.parametrize(
    "env",
    [
        {"CUDA_VISIBLE_DEVICES": "0,1"},  # not an xdist worker
        {"PYTEST_XDIST_WORKER": "gw0", "CUDA_VISIBLE_DEVICES": ""},  # nothing visible
        {"PYTEST_XDIST_WORKER": "gw0"},  # no GPU at all (nvidia-smi absent)
    ],
)
def test_pin_worker_leaves_the_environment_alone_when_there_is_nothing_to_pin(env):
    before = dict(env)
    assert gpu.pin_worker(env, run=smi(None)) is None
    assert env == before


@given(
    devices=st.lists(st.integers(0, 15).map(str), min_size=1, max_size=8, unique=True),
    workers=st.integers(1, 20),
)
def test_every_worker_gets_one_of_the_callers_devices_and_all_are_used(devices, workers):
    chosen = []
    for n in range(workers):
        env = {"PYTEST_XDIST_WORKER": f"gw{n}", "CUDA_VISIBLE_DEVICES": ",".join(devices)}
        chosen.append(gpu.pin_worker(env, run=smi(None)))
    assert set(chosen) <= set(devices)
    assert len(set(chosen)) == min(workers, len(devices))
