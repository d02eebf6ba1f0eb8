"""Skip logic with faked packages, environments and devices: every reason specific and distinct."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from regress.trtllm.requirements import (
    BLACKWELL,
    HOPPER,
    SM100_FAMILY,
    Device,
    Devices,
    Environment,
    Needs,
    arch_name,
    device_unmet,
    find_checkpoint,
    in_sm100_family,
    parse_smi_devices,
    query_devices,
    skip_reason,
    unmet,
)

H200 = Device(sm=90, memory_mib=143_771, name="NVIDIA H200")
B200 = Device(sm=100, memory_mib=183_359, name="NVIDIA B200")
A100 = Device(sm=80, memory_mib=81_920, name="NVIDIA A100-SXM4-80GB")


def found(name):
    return SimpleNamespace(name=name, submodule_search_locations=["/x/tensorrt_llm"])


def env(tmp_path, *, trtllm=True, devices=(), root=None, checkpoints=()):
    """An Environment with a fake package, a fake models root and fake devices."""
    models = tmp_path / "models"
    for name in checkpoints:
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text("{}")
    variables = {"LLM_MODELS_ROOT": str(models)} if root is None else root
    return Environment(
        env=variables,
        find_spec=found if trtllm else (lambda name: None),
        devices=lambda: Devices(tuple(devices)),
        fallback_roots=(),
    )


def kinds(needs, environment):
    return [u.kind for u in unmet(needs, environment)]


DSV32 = Needs(checkpoint="DeepSeek-V3.2-Exp-hf", gpus=8, min_sm=HOPPER, min_memory_mib=140_000)
GLM = Needs(checkpoint="GLM-5.2-NVFP4", gpus=4, min_sm=BLACKWELL)


def test_everything_present_means_no_skip(tmp_path):
    e = env(tmp_path, devices=[H200] * 8, checkpoints=["DeepSeek-V3.2-Exp-hf"])
    assert skip_reason(DSV32, e) is None


def test_missing_tensorrt_llm(tmp_path):
    e = env(tmp_path, trtllm=False, devices=[H200] * 8, checkpoints=["DeepSeek-V3.2-Exp-hf"])
    (reason,) = unmet(DSV32, e)
    assert reason.kind == "trtllm"
    assert "tensorrt_llm" in reason.reason and "not importable" in reason.reason


def test_find_spec_errors_read_as_missing(tmp_path):
    def broken(name):
        raise ValueError("tensorrt_llm.__spec__ is None")

    e = env(tmp_path, devices=[H200] * 8, checkpoints=["DeepSeek-V3.2-Exp-hf"])
    e.find_spec = broken
    assert kinds(DSV32, e) == ["trtllm"]


def test_missing_checkpoint_names_the_path_looked_for(tmp_path):
    e = env(tmp_path, devices=[H200] * 8)
    (reason,) = unmet(DSV32, e)
    assert reason.kind == "checkpoint"
    assert str(tmp_path / "models" / "DeepSeek-V3.2-Exp-hf") in reason.reason


def test_unset_models_root_is_said_and_fallbacks_are_named(tmp_path):
    e = env(tmp_path, devices=[H200] * 8, root={})
    e.fallback_roots = (str(tmp_path / "cluster"),)
    (reason,) = unmet(DSV32, e)
    assert "$LLM_MODELS_ROOT is not set" in reason.reason
    assert str(tmp_path / "cluster" / "DeepSeek-V3.2-Exp-hf") in reason.reason


def test_checkpoint_found_under_a_fallback_root(tmp_path):
    cluster = tmp_path / "cluster" / "GLM-5.2-NVFP4"
    cluster.mkdir(parents=True)
    (cluster / "config.json").write_text("{}")
    e = env(tmp_path, root={})
    e.fallback_roots = (str(tmp_path / "cluster"),)
    assert find_checkpoint("GLM-5.2-NVFP4", e) == cluster


def test_directory_without_config_json_is_not_a_checkpoint(tmp_path):
    e = env(tmp_path, devices=[B200] * 4)
    (tmp_path / "models" / "GLM-5.2-NVFP4").mkdir(parents=True)
    assert kinds(GLM, e) == ["checkpoint"]


def test_too_few_gpus_says_have_and_need(tmp_path):
    e = env(tmp_path, devices=[H200] * 4, checkpoints=["DeepSeek-V3.2-Exp-hf"])
    (reason,) = unmet(DSV32, e)
    assert reason.kind == "gpus"
    assert reason.reason == "needs 8 GPUs, have 4"


def test_wrong_architecture_says_have_and_need(tmp_path):
    e = env(tmp_path, devices=[H200] * 4, checkpoints=["GLM-5.2-NVFP4"])
    (reason,) = unmet(GLM, e)
    assert reason.kind == "arch"
    assert "needs Blackwell (sm100) or newer" in reason.reason
    assert "Hopper (sm90)" in reason.reason and "H200" in reason.reason


def test_hopper_requirement_accepts_blackwell_and_rejects_ampere(tmp_path):
    needs = Needs(gpus=1, min_sm=HOPPER, trtllm=False)
    assert unmet(needs, env(tmp_path, devices=[B200])) == []
    assert kinds(needs, env(tmp_path, devices=[A100])) == ["arch"]


def test_only_the_gpus_used_must_meet_the_architecture(tmp_path):
    needs = Needs(gpus=1, min_sm=BLACKWELL, trtllm=False)
    assert unmet(needs, env(tmp_path, devices=[B200, A100])) == []
    assert kinds(needs, env(tmp_path, devices=[A100, B200])) == ["arch"]


def test_too_little_memory(tmp_path):
    small = Device(sm=90, memory_mib=81_559, name="NVIDIA H100 80GB HBM3")
    e = env(tmp_path, devices=[small] * 8, checkpoints=["DeepSeek-V3.2-Exp-hf"])
    (reason,) = unmet(DSV32, e)
    assert reason.kind == "memory"
    assert reason.reason == "needs 140000 MiB per GPU, have 81559 MiB"


def test_cpu_machine_reports_every_reason_in_one_line(tmp_path):
    e = env(tmp_path, trtllm=False, root={})
    assert kinds(DSV32, e) == ["trtllm", "checkpoint", "gpus", "arch"]
    reason = skip_reason(DSV32, e)
    assert "tensorrt_llm" in reason and "needs 8 GPUs, have 0" in reason
    assert "needs Hopper (sm90) or newer, have no GPU" in reason


def test_every_kind_has_a_distinct_reason(tmp_path):
    e = env(tmp_path, trtllm=False, root={}, devices=[A100])
    reasons = unmet(Needs(checkpoint="X", gpus=2, min_sm=HOPPER), e)
    assert len({u.reason for u in reasons}) == len(reasons) == 4


def test_device_query_failure_is_part_of_the_reason(tmp_path):
    e = env(tmp_path, trtllm=False)
    e.devices = lambda: Devices(error="CUDA device query failed: driver too old")
    reason = skip_reason(Needs(gpus=1, trtllm=False), e)
    assert reason == "needs 1 GPU, have 0: CUDA device query failed: driver too old"


def test_checks_without_device_needs_never_query_devices(tmp_path):
    e = env(tmp_path, checkpoints=["GLM-5.2-NVFP4"])
    e.devices = lambda: pytest.fail("devices must not be queried")
    assert unmet(Needs(checkpoint="GLM-5.2-NVFP4", gpus=0), e) == []


def test_arch_names():
    assert arch_name(90) == "Hopper (sm90)"
    assert arch_name(100) == "Blackwell (sm100)"
    assert arch_name(103) == "Blackwell (sm103)"
    assert arch_name(120) == "Blackwell (sm120)"
    assert arch_name(89) == "sm89"


def test_the_sm100_family_is_upstreams_100_and_103_not_every_blackwell():
    """Issue 21: ``sm >= 100`` also took SM120, where upstream keeps the Hopper settings."""
    assert [sm for sm in (90, 100, 103, 110, 120, 121) if in_sm100_family(sm)] == [100, 103]
    assert not in_sm100_family(None)


def test_an_exact_architecture_set_skips_every_other_one():
    needs = Needs(gpus=1, sms=(90,), trtllm=False)
    blackwell = Devices((Device(100, 183_000, "NVIDIA B200"),))
    (unmet,) = device_unmet(needs, blackwell)
    assert unmet.kind == "arch"
    assert unmet.reason == "needs Hopper (sm90) exactly, have Blackwell (sm100) (NVIDIA B200)"
    assert device_unmet(needs, Devices((Device(90, 143_771, "NVIDIA H200"),))) == []
    assert device_unmet(Needs(sms=SM100_FAMILY), Devices((Device(103, 288_000),))) == []
    assert device_unmet(Needs(sms=SM100_FAMILY), Devices((Device(120, 96_000),)))


SMI = """\
0, GPU-aaaa1111-0000-0000-0000-000000000000, NVIDIA H200, 9.0, 143771
1, GPU-bbbb2222-0000-0000-0000-000000000000, NVIDIA H200, 9.0, 143771
2, GPU-cccc3333-0000-0000-0000-000000000000, NVIDIA B200, 10.0, 183359
"""


def test_nvidia_smi_rows_become_devices_in_index_order():
    devices = parse_smi_devices(SMI, None)
    assert [d.sm for d in devices.devices] == [90, 90, 100]
    assert devices.devices[2] == Device(sm=100, memory_mib=183359, name="NVIDIA B200")


@pytest.mark.parametrize(
    ("visible", "names"),
    [
        ("2,0", ["NVIDIA B200", "NVIDIA H200"]),
        ("GPU-cccc", ["NVIDIA B200"]),
        ("", []),
        ("1,7,2", ["NVIDIA H200"]),  # CUDA stops at the first entry that selects nothing
        ("-1", []),
    ],
)
def test_cuda_visible_devices_is_applied(visible, names):
    assert [d.name for d in parse_smi_devices(SMI, visible).devices] == names


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("0, GPU-a, NVIDIA A100, [N/A], 81920\n", None),  # no compute_cap column on old drivers
        ("0, NVIDIA A100\n", None),
        (SMI, "MIG-abc"),
    ],
)
def test_unreadable_or_mig_falls_back(text, visible):
    assert parse_smi_devices(text, visible) is None


def test_query_prefers_nvidia_smi_and_never_touches_cuda_then():
    asked = []

    def run(argv):
        asked.append(argv)
        return SMI

    devices = query_devices(run, env={"CUDA_VISIBLE_DEVICES": "2"})
    assert [d.sm for d in devices.devices] == [100]
    assert "--query-gpu=index,uuid,name,compute_cap,memory.total" in asked[0]


def test_query_falls_back_to_torch_when_nvidia_smi_is_missing():
    devices = query_devices(lambda argv: None, env={})
    assert devices.count == len(devices.devices) >= 0  # this CPU box: torch says 0


def test_real_query_on_this_machine_does_not_raise():
    devices = query_devices()
    assert devices.count == len(devices.devices) >= 0
