"""regress's pytest plugin (pytest11 entry point): gpu/trtllm markers, stage lists, waives, GPU pinning.

It claims only what a project opted into. Installed, it adds ``--require-gpu``, ``--gpu-per-worker``
and its ini keys, nothing else: an unrelated project's own ``gpu`` marker and its own
``--test-list``/``--waives-file``/``--test-prefix`` options (TensorRT-LLM's
``tests/integration/defs/conftest.py`` defines all three; registering them twice would abort its
pytest runs) are left alone. A project opts in with ``regress = true`` in its pytest ini (this
repository does, in ``pyproject.toml``) or ``-p regress.pytest_plugin``; then the plugin registers
the ``gpu``/``trtllm`` markers and skips (never deselects) tests carrying them when the machine
lacks what they need, and adds ``--test-list``/``--stage``/``--waives``/``--test-prefix``.
``--require-gpu`` alone also turns the gate on, since asking for it is asking for the gate.

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
from pathlib import Path

import pytest

_PINNED = pytest.StashKey["str | None"]()
#: The ini key a project sets to opt in, and the module name ``-p`` opts in with.
OPT_IN_INI = "regress"
PLUGIN_NAME = "regress.pytest_plugin"


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
        from regress.errors import RegressError

        try:
            selector = ListSelector(config)
        except RegressError as exc:
            raise pytest.UsageError(str(exc)) from exc
        config.pluginmanager.register(selector, "regress-lists")
    elif _option(config, "regress_stage"):
        raise pytest.UsageError("--stage NAME only means something with --test-list FILE")


def _collection_error(config: pytest.Config, nodeid: str, message: str) -> None:
    from _pytest.reports import CollectReport

    report = CollectReport(nodeid, "failed", message, [])
    config.hook.pytest_collectreport(report=report)


def _drop_all(config: pytest.Config, items: list[pytest.Item]) -> None:
    if items:
        config.hook.pytest_deselected(items=list(items))
    items[:] = []


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
                    _collection_error(
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
            _collection_error(
                config,
                "--require-gpu",
                f"--require-gpu: {len(short)} selected test(s) need up to {need} CUDA devices but "
                f"{self.probe.count} are visible ({self._describe(need)}): {listed}. Run on a node with "
                f">= {need} GPUs, or drop --require-gpu to skip them.",
            )
            _drop_all(config, items)

    @property
    def has_trtllm(self) -> bool:
        # find_spec locates the package without importing it (importing initialises CUDA).
        if self._has_trtllm is None:
            self._has_trtllm = importlib.util.find_spec("tensorrt_llm") is not None
        return self._has_trtllm


class ListSelector:
    """Applies ``--test-list``/``--stage`` (selection) and ``--waives`` (markers)."""

    def __init__(self, config: pytest.Config) -> None:
        from regress.ci.stages import resolve_entries
        from regress.ci.waives import load_waives

        self.config = config
        self.entries = None
        self.stage = None
        self.source = None
        self.waives = []
        self._broken: set[str] = set()
        test_list = config.getoption("regress_test_list")
        if test_list:
            path = _resolve_path(config, test_list)
            self.entries, self.stage, self.source = resolve_entries(
                path, config.getoption("regress_stage")
            )
            self._entry_paths = sorted({entry.path for entry in self.entries})
        elif config.getoption("regress_stage"):
            from regress.errors import UsageError

            raise UsageError("--stage NAME only means something with --test-list FILE")
        waives = config.getoption("regress_waives")
        if waives:
            path = _resolve_path(config, waives)
            if not path.is_file():
                from regress.errors import UsageError

                raise UsageError(f"--waives {waives}: no such file")
            self.waives = load_waives(path)
        prefix = config.getoption("regress_test_prefix") or config.getoption("regress_stage")
        self.test_prefix = prefix

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = []
        if self.entries is not None:
            stage = f"stage {self.stage.name} " if self.stage else ""
            lines.append(f"regress: {stage}list {self.source}: {len(self.entries)} entries")
        if self.waives:
            lines.append(f"regress: {len(self.waives)} waives")
        return lines

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        # Import only what the list names: an unrelated module that cannot import on this node
        # (the GPU box lacks hypothesis, a CPU box lacks tensorrt_llm) must not sink the stage.
        if self.entries is None:
            return None
        try:
            rel = collection_path.resolve().relative_to(self.config.rootpath.resolve()).as_posix()
        except ValueError:
            return None
        for path in self._entry_paths:
            if rel in (".", path) or rel.startswith(path + "/") or path.startswith(rel + "/"):
                return None
        return True

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and report.nodeid:
            self._broken.add(report.nodeid.split("::", 1)[0])

    def _covered(self) -> list[str]:
        """Rootdir-relative paths the collection arguments cover entirely."""
        root = self.config.rootpath.resolve()
        covered = []
        for arg in self.config.args:
            if "::" in arg:
                continue  # a node id argument narrows below file level
            path = Path(arg)
            if not path.is_absolute():
                path = self.config.invocation_params.dir / path
            try:
                covered.append(path.resolve().relative_to(root).as_posix())
            except ValueError:
                continue
        return covered

    def _required(self, covered: list[str]):
        def required(entry) -> bool:
            path = entry.path
            if any(path == b or path.startswith(b + "/") for b in self._broken):
                return False  # its file failed to collect: that error is already reported
            return any(c == "." or path == c or path.startswith(c + "/") for c in covered)

        return required

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if self.entries is not None:
            from regress.ci.selection import select, unmatched_message

            nodeids = [item.nodeid for item in items]
            selection = select(
                self.entries,
                nodeids,
                required=self._required(self._covered()),
                admits=lambda entry, index: _admits(items[index], entry.keyword, entry.markexpr),
            )
            if selection.unmatched:
                lines = [unmatched_message(e, nodeids) for e in selection.unmatched[:20]]
                more = len(selection.unmatched) - len(lines)
                if more > 0:
                    lines.append(f"... and {more} more")
                _collection_error(
                    config,
                    self.source or "--test-list",
                    "test list entries match no collected test (fix or remove them; "
                    "`regress testlist validate` checks every list):\n" + "\n".join(lines),
                )
                _drop_all(config, items)
                return
            keep = set(selection.selected)
            deselected = [item for i, item in enumerate(items) if i not in keep]
            kept = [items[i] for i in selection.selected]
            for index, item in zip(selection.selected, kept, strict=True):
                entry = selection.entry_for[index]
                _apply_markers(config, item, entry.timeout_minutes, entry.isolation)
            if deselected:
                config.hook.pytest_deselected(items=deselected)
            items[:] = kept
        if self.waives:
            self._apply_waives(items)

    def _apply_waives(self, items: list[pytest.Item]) -> None:
        from regress.ci.waives import applicable, waive_for

        waives = applicable(self.waives, self.test_prefix)
        for item in items:
            waive = waive_for(
                item.nodeid, waives, lambda w, item=item: _admits(item, w.keyword, w.markexpr)
            )
            if waive is None:
                continue
            reason = f"waived: {waive.reason or waive.describe()}"
            if waive.kind == "SKIP":
                item.add_marker(pytest.mark.skip(reason=reason))
            elif waive.kind in ("XFAIL", "UNSTABLE"):
                item.add_marker(pytest.mark.xfail(reason=reason, strict=False))
            _apply_markers(self.config, item, waive.timeout_minutes, waive.isolation)
            item.user_properties.append(("waive", waive.describe()))


def _admits(item: pytest.Item, keyword: str | None, markexpr: str | None) -> bool:
    """Whether a list line's ``-k``/``-m`` expressions admit ``item``, as pytest's own -k/-m do."""
    from _pytest.mark import KeywordMatcher, MarkMatcher

    if keyword is not None and not _compiled(keyword).evaluate(KeywordMatcher.from_item(item)):
        return False
    if markexpr is not None:
        marks = MarkMatcher.from_markers(item.iter_markers())
        if not _compiled(markexpr).evaluate(marks):
            return False
    return True


_EXPRESSIONS: dict[str, object] = {}


def _compiled(expr: str):
    from _pytest.mark.expression import Expression

    if expr not in _EXPRESSIONS:
        _EXPRESSIONS[expr] = Expression.compile(expr)
    return _EXPRESSIONS[expr]


def _apply_markers(
    config: pytest.Config, item: pytest.Item, timeout_minutes: int | None, isolation: bool
) -> None:
    """TIMEOUT (N) and ISOLATION: recorded in JUnit, enforced where the plugins that do it exist."""
    if timeout_minutes is not None:
        item.user_properties.append(("timeout_minutes", timeout_minutes))
        if config.pluginmanager.hasplugin("timeout"):
            item.add_marker(pytest.mark.timeout(timeout_minutes * 60))
    if isolation:
        item.user_properties.append(("isolation", True))
        if config.pluginmanager.hasplugin("forked"):
            item.add_marker(pytest.mark.forked)


def _resolve_path(config: pytest.Config, value: str) -> Path:
    # pytest does not chdir, so a relative path is still relative to where the user ran it; keep
    # it relative so error messages show the path the user typed.
    path = Path(value)
    if path.is_absolute() or Path.cwd() == config.invocation_params.dir:
        return path
    return config.invocation_params.dir / path


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
