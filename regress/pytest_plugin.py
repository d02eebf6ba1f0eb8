"""regress's pytest plugin (pytest11 entry point): gpu/trtllm markers, stage lists, waives, GPU pinning.

It claims only what a project opted into. Installed but not opted into, it changes exactly this in
any project pytest runs: two options, ``--require-gpu`` and ``--gpu-per-worker`` (group
"regress"); two ini keys, ``regress`` and ``regress_gpu_per_worker``; and one fixture,
``dsa_sentinel``, which does nothing unless a test requests it (a project's own fixture of that
name wins, as conftest fixtures always beat plugin ones). Nothing else: no marker is registered or
gated, so an unrelated project's own ``gpu`` marker keeps its meaning, and none of the options
below exists, so a project defining ``--test-list``/``--waives-file``/``--test-prefix`` itself
(TensorRT-LLM's ``tests/integration/defs/conftest.py`` defines all three; registering them twice
would abort its pytest runs) is left alone.

A project opts in with ``regress = true`` in its pytest ini (this repository does, in
``pyproject.toml``) or ``-p regress.pytest_plugin``. Then the plugin also registers the
``gpu``/``trtllm`` markers and skips (never deselects) tests carrying them when the machine lacks
what they need; adds ``--test-list``/``--stage``/``--waives``/``--test-prefix``; and loads
:mod:`regress.check.plugin`, the upstream contract tests' ``--trtllm-src`` option and
``trtllm_src`` fixture (``-p regress.check.plugin`` loads that one alone). ``--require-gpu``
alone also turns the gate on, since asking for it is asking for the gate.

The list and waive machinery is registered as a separate plugin object only when ``--test-list``
or ``--waives`` is given (the way pytest-xdist registers its distributed session only when
distributing), and nothing heavy is imported at module level: the GPU box imports this with only
torch, pytest, xdist, click and pyyaml installed. With ``--test-list`` only the paths the list
names are imported at all, so a module that cannot import on this node (hypothesis on the GPU
box, tensorrt_llm on a CPU box) cannot sink a stage that does not run it.

Errors found after collection (a list entry that matches nothing, too few GPUs under
``--require-gpu`` in an xdist worker) are reported as a failed collection report rather than
raised: that is the one path that surfaces cleanly both in a plain run and from xdist workers, and
it lands in the JUnit XML as an error.
"""

from __future__ import annotations

import importlib.util

import pytest

from regress.ci.pytest_lists import collection_error, drop_all

_PINNED = pytest.StashKey["str | None"]()
#: The ini key a project sets to opt in, and the module name ``-p`` opts in with.
OPT_IN_INI = "regress"
PLUGIN_NAME = "regress.pytest_plugin"
#: --trtllm-src and the trtllm_src fixture (the upstream contract tests): loaded on opt-in only.
UPSTREAM_PLUGIN = "regress.check.plugin"


def _opted_in(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether the project asked for the plugin, read while options are still being registered.

    pytest has read the ini file and the ``-p`` arguments before it loads entry-point plugins
    (``Config._preparse``), so both can be consulted here.
    """
    config = pluginmanager.get_plugin("pytestconfig")
    if config is None:
        return False
    namespace = getattr(config, "known_args_namespace", None)
    if PLUGIN_NAME in (getattr(namespace, "plugins", None) or []):
        return True
    try:
        return bool(config.getini(OPT_IN_INI))
    except (ValueError, KeyError):
        return False


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("regress", "regress CI: stage test lists, waives, GPUs")
    parser.addini(
        OPT_IN_INI,
        type="bool",
        default=False,
        help="use regress's plugin here: gpu/trtllm markers and --test-list/--stage/--waives",
    )
    group.addoption(
        "--require-gpu",
        action="store_true",
        dest="regress_require_gpu",
        help="fail the run (instead of skipping gpu tests) when CUDA devices are missing or too few",
    )
    group.addoption(
        "--gpu-per-worker",
        action="store_true",
        dest="regress_gpu_per_worker",
        help="pin each xdist worker to one GPU of the caller's CUDA_VISIBLE_DEVICES",
    )
    parser.addini(
        "regress_gpu_per_worker",
        type="bool",
        default=False,
        help="like --gpu-per-worker, for projects that always want it",
    )
    if not _opted_in(pluginmanager):
        return
    pluginmanager.import_plugin(UPSTREAM_PLUGIN)  # pytest_addoption is historic: it runs at once
    group.addoption(
        "--test-list",
        dest="regress_test_list",
        metavar="FILE",
        help="run only what this test-db YAML (or .txt) list names; a directory needs --stage",
    )
    group.addoption(
        "--stage",
        dest="regress_stage",
        metavar="NAME",
        help="the stage (from stages.yml beside the list) whose conditions select list blocks",
    )
    group.addoption(
        "--waives",
        "--waives-file",
        dest="regress_waives",
        metavar="FILE",
        help="waive list ('<id> SKIP|XFAIL|UNSTABLE [(reason)]' lines), applied as markers",
    )
    group.addoption(
        "--test-prefix",
        dest="regress_test_prefix",
        metavar="STAGE",
        help="stage name that 'full:X/' waives are matched against (X = its part before the "
        "first '-'); default: --stage",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # Runs in each xdist worker after PYTEST_XDIST_WORKER is exported and before any conftest
    # can import torch, which is the last moment CUDA_VISIBLE_DEVICES still takes effect.
    options = early_config.known_args_namespace
    wanted = getattr(options, "regress_gpu_per_worker", False)
    if wanted or early_config.getini("regress_gpu_per_worker"):
        from regress.ci.gpu import pin_worker

        early_config.stash[_PINNED] = pin_worker()


def _option(config: pytest.Config, dest: str):
    return getattr(config.option, dest, None)


def pytest_configure(config: pytest.Config) -> None:
    require_gpu = config.getoption("regress_require_gpu")
    if config.getini(OPT_IN_INI) or require_gpu or PLUGIN_NAME in (config.option.plugins or []):
        config.addinivalue_line(
            "markers",
            "gpu(count=1): needs CUDA devices; skipped with a reason when too few are visible",
        )
        config.addinivalue_line(
            "markers", "trtllm: needs the optional tensorrt_llm package; skipped when it is absent"
        )
        gate = DeviceGate(config)
        config.pluginmanager.register(gate, "regress-devices")
        if require_gpu and not hasattr(config, "workerinput"):
            probe = gate.probe
            if probe.count == 0:
                raise pytest.UsageError(
                    f"--require-gpu: no CUDA device is visible ({probe.source}). Run this stage on "
                    "a GPU node, fix CUDA_VISIBLE_DEVICES, or drop --require-gpu to skip gpu tests."
                )
    if _option(config, "regress_test_list") or _option(config, "regress_waives"):
        from regress.ci.pytest_lists import ListSelector
        from regress.errors import RegressError

        try:
            selector = ListSelector(config)
        except RegressError as exc:
            raise pytest.UsageError(str(exc)) from exc
        config.pluginmanager.register(selector, "regress-lists")
    elif _option(config, "regress_stage"):
        raise pytest.UsageError("--stage NAME only means something with --test-list FILE")


class DeviceGate:
    """Skips ``gpu``/``trtllm`` tests the machine cannot run, or fails the run under --require-gpu."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._probe = None
        self._has_trtllm: bool | None = None

    @property
    def probe(self):
        """The device probe, run once and only when a gpu test or --require-gpu needs it."""
        if self._probe is None:
            from regress.ci.gpu import probe_devices

            self._probe = probe_devices()
        return self._probe

    def _describe(self, count: int = 1) -> str:
        pinned = self.config.stash.get(_PINNED, None)
        where = self.probe.source
        if pinned is not None and count > 1:
            where += (
                f"; this xdist worker is pinned to device {pinned}, run multi-GPU tests without -n"
            )
        return where

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        short: list[tuple[str, int]] = []
        for item in items:
            # Every missing requirement goes into one skip reason, so a TensorRT-LLM test on a
            # laptop says both "no GPU" and "no tensorrt_llm" rather than whichever came first.
            reasons: list[str] = []
            marker = item.get_closest_marker("gpu")
            if marker is not None:
                count = marker.kwargs.get("count", marker.args[0] if marker.args else 1)
                if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                    collection_error(
                        config,
                        item.nodeid,
                        f"gpu marker count must be a positive int, got {count!r}",
                    )
                    continue
                if count > self.probe.count:
                    if config.getoption("regress_require_gpu"):
                        short.append((item.nodeid, count))
                    else:
                        noun = "device" if count == 1 else "devices"
                        reasons.append(
                            f"gpu: needs {count} CUDA {noun}, {self.probe.count} visible "
                            f"({self._describe(count)})"
                        )
            if item.get_closest_marker("trtllm") is not None and not self.has_trtllm:
                reasons.append(
                    "trtllm: the tensorrt_llm package is not installed (pip install tensorrt_llm, "
                    "or run this on the TensorRT-LLM image)"
                )
            if reasons:
                item.add_marker(pytest.mark.skip(reason="; ".join(reasons)))
        if short:
            need = max(count for _, count in short)
            listed = ", ".join(nodeid for nodeid, _ in short[:5]) + (
                ", ..." if len(short) > 5 else ""
            )
            collection_error(
                config,
                "--require-gpu",
                f"--require-gpu: {len(short)} selected test(s) need up to {need} CUDA devices but "
                f"{self.probe.count} are visible ({self._describe(need)}): {listed}. Run on a node with "
                f">= {need} GPUs, or drop --require-gpu to skip them.",
            )
            drop_all(config, items)

    @property
    def has_trtllm(self) -> bool:
        # find_spec locates the package without importing it (importing initialises CUDA).
        if self._has_trtllm is None:
            self._has_trtllm = importlib.util.find_spec("tensorrt_llm") is not None
        return self._has_trtllm


@pytest.fixture
def dsa_sentinel(request):
    """A :class:`regress.dsa.sentinel.Sentinel` that fails the test on any DSA contract violation.

    Attach it to live metadata (``dsa_sentinel.attach(md)``, or pass it to an engine); at teardown
    owed CUDA-graph checks run, its summary joins the test's ``user_properties`` (``dsa_sentinel``),
    and any violation errors the test with the call site, phase and message of each.
    """
    import json

    from regress.dsa.sentinel import Sentinel

    sentinel = Sentinel()
    yield sentinel
    sentinel.flush()
    sentinel.detach()
    request.node.user_properties.append(("dsa_sentinel", json.dumps(sentinel.summary())))
    if sentinel.num_violations:
        shown = "\n".join(
            f"  {v.site} [{v.phase}] layout {v.seq_lens[:12]}: {v.message}"
            for v in sentinel.violations[:10]
        )
        pytest.fail(
            f"DSA sentinel: {sentinel.num_violations} contract violation(s)\n{shown}",
            pytrace=False,
        )
