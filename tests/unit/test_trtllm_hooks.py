"""The sentinel hook against a fake DSA module: lazy install, copies, flushing, workers, undo."""

from __future__ import annotations

import copy
import importlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from regress.dsa.lifecycle import run_forwards, serving_forwards
from regress.trtllm import hooks, import_hooks
from regress.trtllm.gates import sentinel_failures

METADATA = """
import copy
import dataclasses


@dataclasses.dataclass
class AttentionMetadata:
    seq_lens: tuple = (1,)
    is_cuda_graph: bool = False

    def __post_init__(self):
        self.buffers = list(self.seq_lens)

    def prepare(self):
        self.prepared = getattr(self, "prepared", 0) + 1

    def create_cuda_graph_metadata(self):
        # Upstream's pattern: a shallow copy, then __post_init__ again.
        clone = copy.copy(self)
        clone.is_cuda_graph = True
        clone.__post_init__()
        return clone


@dataclasses.dataclass
class DSAtrtllmAttentionMetadata(AttentionMetadata):
    stale: bool = False

    def __post_init__(self):
        super().__post_init__()
        self.req_idx_per_token = [0] * len(self.seq_lens)


@dataclasses.dataclass
class SubclassMetadata(DSAtrtllmAttentionMetadata):
    def __post_init__(self):
        super().__post_init__()
        self.extra = True


@dataclasses.dataclass
class SiblingMetadata(AttentionMetadata):
    pass
"""

SENTINEL = '''
class Sentinel:
    """Wraps prepare on the instance, like the real sentinel, and flags stale objects."""

    def __init__(self):
        self.violations = []
        self.target = None

    def attach(self, metadata):
        self.target = metadata
        original = metadata.prepare

        def prepare(*args, **kwargs):
            result = original(*args, **kwargs)
            if metadata.stale:
                self.violations.append(
                    {"check": "req_idx_map", "message": "stale map", "details": {"id": id(metadata)}}
                )
            return result

        metadata.prepare = prepare


class Broken:
    def attach(self, metadata):
        raise RuntimeError("cannot attach")
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A uniquely named package with an era-C-like DSA module and a fake sentinel."""
    name = f"fakedsa_{uuid.uuid4().hex[:8]}"
    module_dir = tmp_path / "src" / name / "backends" / "sparse" / "dsa"
    module_dir.mkdir(parents=True)
    (module_dir / "metadata.py").write_text(METADATA)
    (tmp_path / "src" / name / "sentinel.py").write_text(SENTINEL)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    importlib.invalidate_caches()
    sink = tmp_path / "sink"
    config = hooks.HookConfig(
        sink_dir=str(sink),
        module_names=(f"{name}.backends.sparse.dsa.metadata",),
        sentinel=f"{name}.sentinel:Sentinel",
    )
    yield SimpleNamespace(
        name=name,
        module=f"{name}.backends.sparse.dsa.metadata",
        config=config,
        sink=sink,
        src=tmp_path / "src",
    )
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


@pytest.fixture
def session(fake):
    with hooks.sentinel_session(fake.config) as installation:
        yield installation


def test_hook_installs_lazily_when_the_module_is_imported(fake, session):
    assert fake.module not in sys.modules
    module = importlib.import_module(fake.module)
    module.DSAtrtllmAttentionMetadata()
    assert session.recorder.attached == 1
    (record,) = hooks.read_report(fake.sink).attached
    assert record["class"].endswith("DSAtrtllmAttentionMetadata")
    assert record["pid"] == os.getpid()


def test_hook_installs_at_once_when_the_module_is_already_imported(fake):
    module = importlib.import_module(fake.module)
    with hooks.sentinel_session(fake.config) as installation:
        module.DSAtrtllmAttentionMetadata()
    assert installation.recorder.attached == 1


def test_base_and_sibling_backends_are_untouched(fake, session):
    module = importlib.import_module(fake.module)
    module.AttentionMetadata()
    module.SiblingMetadata()
    assert session.recorder.attached == 0
    assert "__post_init__" not in vars(module.AttentionMetadata) or not hasattr(
        module.AttentionMetadata.__post_init__, "__wrapped__"
    )


def test_subclasses_are_covered_once_per_object(fake, session):
    module = importlib.import_module(fake.module)
    md = module.SubclassMetadata()
    assert md.extra is True
    assert session.recorder.attached == 1


def test_violation_is_recorded_after_prepare(fake, session):
    module = importlib.import_module(fake.module)
    md = module.DSAtrtllmAttentionMetadata(seq_lens=(4, 4), stale=True)
    md.prepare()
    assert md.prepared == 1  # the original prepare still ran
    report = hooks.read_report(fake.sink)
    (violation,) = report.violations
    assert violation["check"] == "req_idx_map"
    assert not report.clean
    md.prepare()  # written as it happens: a second prepare adds exactly one more line
    assert len(hooks.read_report(fake.sink).violations) == 2


def test_cuda_graph_copy_gets_its_own_sentinel(fake, session):
    module = importlib.import_module(fake.module)
    original = module.DSAtrtllmAttentionMetadata(seq_lens=(1, 1))
    graph = original.create_cuda_graph_metadata()
    assert session.recorder.attached == 2
    graph.stale = True  # only the copy goes stale
    graph.prepare()
    # Had the copy kept the original's instance wrapper, its check would have read the original.
    assert len(session.recorder.violations) == 1
    assert session.recorder.violations[0]["details"]["id"] == id(graph)
    (attached_copy,) = [r for r in hooks.read_report(fake.sink).attached if r["copy"]]
    assert attached_copy["class"].endswith("DSAtrtllmAttentionMetadata")


def test_plain_copy_without_post_init_keeps_the_original_sentinel(fake, session):
    # Documented limit: only copies that rerun __post_init__ (upstream's pattern) get their own.
    module = importlib.import_module(fake.module)
    clone = copy.copy(module.DSAtrtllmAttentionMetadata())
    assert session.recorder.attached == 1
    assert clone is not None


def test_clean_report_needs_an_attachment(fake, session):
    report = hooks.read_report(fake.sink)
    assert not report.clean
    assert "attached to no metadata object" in sentinel_failures(report)[0]
    module = importlib.import_module(fake.module)
    module.DSAtrtllmAttentionMetadata().prepare()
    report = hooks.read_report(fake.sink)
    assert report.clean
    assert sentinel_failures(report) == []


def test_attach_failure_is_an_error_not_silence(fake):
    config = hooks.HookConfig(**{**vars(fake.config), "sentinel": f"{fake.name}.sentinel:Broken"})
    with hooks.sentinel_session(config):
        importlib.import_module(fake.module).DSAtrtllmAttentionMetadata()
    report = hooks.read_report(fake.sink)
    assert report.attached == []
    (error,) = report.errors
    assert "cannot attach" in error["error"]
    assert any("hook error" in f for f in sentinel_failures(report))


def test_unknown_sentinel_factory_is_recorded(fake):
    config = hooks.HookConfig(**{**vars(fake.config), "sentinel": "no_such_module_xyz:Sentinel"})
    with hooks.sentinel_session(config):
        importlib.import_module(fake.module).DSAtrtllmAttentionMetadata()
    assert "no_such_module_xyz" in hooks.read_report(fake.sink).errors[0]["error"]


def test_uninstall_restores_the_class_and_stops_watching(fake):
    module = importlib.import_module(fake.module)
    cls = module.DSAtrtllmAttentionMetadata
    before = (vars(cls)["__post_init__"], cls.prepare)
    finders = list(sys.meta_path)
    with hooks.sentinel_session(fake.config) as installation:
        assert vars(cls)["__post_init__"] is not before[0]
    assert (vars(cls)["__post_init__"], cls.prepare) == before
    assert "prepare" not in vars(cls)  # it was inherited, so the patch is deleted, not set
    assert sys.meta_path == finders
    cls()
    assert installation.recorder.attached == 0


def test_patching_twice_is_idempotent(fake):
    module = importlib.import_module(fake.module)
    recorder = hooks.Recorder(fake.config)
    undo = hooks.patch_class(module.DSAtrtllmAttentionMetadata, recorder)
    assert hooks.patch_class(module.DSAtrtllmAttentionMetadata, recorder) is undo
    module.DSAtrtllmAttentionMetadata()
    assert recorder.attached == 1
    undo()


def test_in_process_factory_overrides_the_configured_one(fake):
    attached = []

    class Counting:
        violations = ()

        def attach(self, metadata):
            attached.append(metadata)

    with hooks.sentinel_session(fake.config, factory=Counting):
        md = importlib.import_module(fake.module).DSAtrtllmAttentionMetadata()
    assert attached == [md]


def test_mpi_pool_gets_our_initializer_and_keeps_theirs(fake):
    calls = []

    class Executor:
        def __init__(self, **kwargs):
            calls.append(kwargs)

    mpi_session = SimpleNamespace(MPIPoolExecutor=Executor)
    with hooks.sentinel_session(fake.config, mpi_session_module=mpi_session):
        mpi_session.MPIPoolExecutor(max_workers=4, path=["x"], initializer=print, initargs=("a",))
    assert mpi_session.MPIPoolExecutor is Executor  # undone
    (kwargs,) = calls
    assert kwargs["max_workers"] == 4 and kwargs["path"] == ["x"]
    assert kwargs["initializer"] is hooks.install_in_worker
    assert kwargs["initargs"] == (fake.config, print, ("a",))


def test_worker_initializer_runs_the_chained_one(fake):
    seen = []
    hooks.install_in_worker(fake.config, seen.append, ("chained",))
    assert seen == ["chained"]
    # install_in_worker hooks this process for good (it is a worker); undo it for the suite.
    for finder in [f for f in sys.meta_path if isinstance(f, import_hooks._PostImportFinder)]:
        if fake.module in finder.names:
            sys.meta_path.remove(finder)


def test_a_worker_process_records_into_the_shared_sink(fake):
    # What an MPI worker does: the initializer runs, then TensorRT-LLM imports the DSA module and
    # builds metadata. Run it in a real child process and read its records from here.
    code = textwrap.dedent(
        f"""
        import importlib, json, sys
        from regress.trtllm import hooks
        config = hooks.HookConfig(**json.loads(sys.argv[1]))
        hooks.install_in_worker(config)
        module = importlib.import_module({fake.module!r})
        md = module.DSAtrtllmAttentionMetadata(seq_lens=(3, 1), stale=True)
        md.prepare()
        md.create_cuda_graph_metadata()
        """
    )
    config = {**vars(fake.config), "module_names": list(fake.config.module_names)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.src), *sys.path])}
    subprocess.run(
        [sys.executable, "-c", code, json.dumps(config)], check=True, env=env, timeout=120
    )
    report = hooks.read_report(fake.sink)
    assert {r["pid"] for r in report.attached} != {os.getpid()}
    assert len(report.attached) == 2
    assert len(report.violations) == 1
    assert report.errors == []


def test_reexporting_package_and_module_share_one_patch(tmp_path, monkeypatch):
    # Era B/C: the package __init__ re-exports the class its metadata module defines; both are
    # watched, the class is patched once, and undoing works even for an inherited __post_init__.
    name = f"fakepkg_{uuid.uuid4().hex[:8]}"
    pkg = tmp_path / name / "dsa"
    pkg.mkdir(parents=True)
    (pkg / "metadata.py").write_text(
        "class Base:\n    def __post_init__(self):\n        pass\n\n\n"
        "class DSAtrtllmAttentionMetadata(Base):\n"
        "    def __init__(self):\n        self.__post_init__()\n\n"
        "    def prepare(self):\n        pass\n"
    )
    (pkg / "__init__.py").write_text("from .metadata import DSAtrtllmAttentionMetadata\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    config = hooks.HookConfig(
        sink_dir=str(tmp_path / "sink"),
        module_names=(f"{name}.dsa.metadata", f"{name}.dsa"),
        sentinel="pathlib:PurePath",  # unused: the factory below wins
    )
    attached = []
    factory = lambda: SimpleNamespace(attach=attached.append, violations=[])  # noqa: E731
    try:
        with hooks.sentinel_session(config, factory=factory) as installation:
            cls = importlib.import_module(f"{name}.dsa").DSAtrtllmAttentionMetadata
            assert "__post_init__" in vars(cls)  # patched on the class itself
            cls()
            assert len(installation.undos) == 2  # the import hook and one class patch
        assert "__post_init__" not in vars(cls)  # inherited again
        assert len(attached) == 1
        # The loader wrapper still answers importlib's other questions.
        assert importlib.import_module(f"{name}.dsa").__spec__.loader.is_package(f"{name}.dsa")
    finally:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]


def test_mpi_session_without_mpi4py_is_left_alone(fake):
    mpi_session = SimpleNamespace(MPIPoolExecutor=None)
    with hooks.sentinel_session(fake.config, mpi_session_module=mpi_session):
        assert mpi_session.MPIPoolExecutor is None


def test_torn_last_line_is_reported_as_an_error(tmp_path):
    (tmp_path / "1.jsonl").write_text('{"event": "attached", "pid": 1}\n{"event": "viol')
    report = hooks.read_report(tmp_path)
    assert len(report.attached) == 1
    assert "bad line" in report.errors[0]["error"]


def test_dataclass_violations_are_serialised(fake, session, monkeypatch):
    from regress.dsa.invariants import Violation

    module = importlib.import_module(fake.module)
    md = module.DSAtrtllmAttentionMetadata()
    sentinel = session.recorder._sentinels[0]
    sentinel.violations.append(Violation("kv_lens_2d_width", "too narrow", {"shape": [32, 1]}))
    session.recorder.flush()
    (violation,) = hooks.read_report(fake.sink).violations
    assert violation == {
        "event": "violation",
        "pid": os.getpid(),
        "check": "kv_lens_2d_width",
        "message": "too narrow",
        "details": {"shape": [32, 1]},
    }
    assert md is not None


def test_resolve_factory_needs_module_and_attribute():
    with pytest.raises(ValueError, match="module:attr"):
        hooks.resolve_factory("regress.dsa")
    assert hooks.resolve_factory("pathlib:Path") is Path


class ContractSentinel:
    """A minimal stand-in for regress.dsa.sentinel: check the map after every kv-lens update."""

    def __init__(self):
        self.violations = []

    def attach(self, metadata):
        from regress.dsa.invariants import check_req_idx_map

        inner = metadata.update_for_spec_dec

        def update_for_spec_dec(*args, **kwargs):
            result = inner(*args, **kwargs)
            self.violations.extend(check_req_idx_map(metadata))
            return result

        metadata.update_for_spec_dec = update_for_spec_dec


@pytest.mark.parametrize(("defects", "stale"), [([], False), (["stale_req_idx"], True)])
def test_hook_on_the_reference_mirror_catches_the_stale_map(tmp_path, defects, stale):
    # The reference mirror of DSAtrtllmAttentionMetadata (regress.reference.metadata) is shaped
    # like upstream's: hooking it and running the one-model MTP-Eagle draft loop at batch 4, K = 3
    # must record the stale map of bug 1 and nothing on the fixed code.
    from regress.reference import scenarios
    from regress.reference.metadata import DSAtrtllmAttentionMetadata

    original_init = vars(DSAtrtllmAttentionMetadata)["__init__"]
    config = hooks.HookConfig(str(tmp_path / "sink"), ("regress.reference.metadata",))
    with hooks.sentinel_session(config, factory=ContractSentinel):
        md = scenarios.make_dsa_metadata(max_num_requests=4, max_num_tokens=64, defects=defects)
        forwards = serving_forwards(batch_size=4, max_draft_len=3, generations=2)
        run_forwards(md, forwards, max_draft_len=3)  # upstream's order: regress.dsa.lifecycle
    report = hooks.read_report(tmp_path / "sink")
    assert len(report.attached) == 1
    assert bool(report.violations) is stale
    if stale:
        assert {v["check"] for v in report.violations} == {"req_idx_map"}
    assert vars(DSAtrtllmAttentionMetadata)["__init__"] is original_init  # undone


def test_the_real_sentinel_is_the_default_and_its_records_say_where(tmp_path):
    # regress.dsa.sentinel.Sentinel attached through the default config (no factory override) to
    # the reference DSA mirror running bug 1's draft loop.
    from regress.reference import scenarios

    config = hooks.HookConfig(str(tmp_path / "sink"), ("regress.reference.metadata",))
    assert config.sentinel == "regress.dsa.sentinel:Sentinel"
    with hooks.sentinel_session(config):
        md = scenarios.make_dsa_metadata(
            max_num_requests=4, max_num_tokens=64, defects=["stale_req_idx"]
        )
        forwards = serving_forwards(batch_size=4, max_draft_len=3, generations=2)
        run_forwards(md, forwards, max_draft_len=3)
    report = hooks.read_report(tmp_path / "sink")
    assert report.errors == [] and len(report.attached) == 1
    assert report.violations, "the real sentinel must see the stale map"
    first = report.violations[0]
    assert first["check"] == "req_idx_map"
    assert first["phase"] == "eager" and first["site"] in {
        "on_update_kv_lens",
        "update_for_spec_dec",
    }
    assert first["backend"] == "DSAtrtllmAttentionMetadata"


@pytest.mark.parametrize("k", [3, 4])
def test_the_real_sentinel_is_clean_on_a_fixed_build_through_upstreams_lifecycle(tmp_path, k):
    # Issue 11 items 1-2: attached at construction (seq_lens None, as upstream builds it) and run
    # through several forwards at batch 8, the default sentinel must neither crash the engine at
    # the first update_spec_dec_param nor flag the map the restore leaves in draft layout.
    from regress.reference import scenarios

    config = hooks.HookConfig(str(tmp_path / "sink"), ("regress.reference.metadata",))
    with hooks.sentinel_session(config):
        md = scenarios.make_dsa_metadata(max_num_requests=8, max_num_tokens=64, defects=())
        forwards = serving_forwards(batch_size=8, max_draft_len=k, generations=3)
        run_forwards(md, forwards, max_draft_len=k)
    report = hooks.read_report(tmp_path / "sink")
    assert report.clean, (report.violations[:2], report.errors[:2])


def test_replay_hooks_run_once_per_process_and_are_undone(fake, tmp_path):
    module = tmp_path / "src" / f"{fake.name}_replay.py"
    module.write_text(
        "CALLS = []\n\n\ndef install():\n    CALLS.append('install')\n\n\n"
        "def remove():\n    CALLS.append('remove')\n"
    )
    importlib.invalidate_caches()
    config = hooks.HookConfig(
        **{
            **vars(fake.config),
            "replay_hooks": (f"{fake.name}_replay:install", f"{fake.name}_replay:remove"),
        }
    )
    with hooks.sentinel_session(config):
        cls = importlib.import_module(fake.module).DSAtrtllmAttentionMetadata
        cls().create_cuda_graph_metadata()
        calls = list(importlib.import_module(f"{fake.name}_replay").CALLS)
    assert calls == ["install"]
    assert importlib.import_module(f"{fake.name}_replay").CALLS == ["install", "remove"]
    del sys.modules[f"{fake.name}_replay"]


def test_final_flush_collects_checks_the_sentinel_still_owes(fake):
    class Owing:
        def __init__(self):
            self.violations = []

        def attach(self, metadata):
            pass

        def flush(self):  # e.g. snapshots captured in a CUDA graph, never replayed
            self.violations.append({"check": "req_idx_map", "message": "seen at the end"})

    with hooks.sentinel_session(fake.config, factory=Owing):
        importlib.import_module(fake.module).DSAtrtllmAttentionMetadata().prepare()
        assert hooks.read_report(fake.sink).violations == []  # a plain flush does not ask
    (violation,) = hooks.read_report(fake.sink).violations
    assert violation["message"] == "seen at the end"
