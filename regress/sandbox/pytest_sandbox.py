"""Upstream's own unit tests through the sandbox: ``pytest --trtllm-src PATH PATH/tests/...``.

TensorRT-LLM's unit tests need an importable ``tensorrt_llm`` (a built wheel) and skip without
CUDA. When every test path on the command line lies inside the ``--trtllm-src`` checkout,
:func:`register` installs :class:`SandboxedTests` for the run (only then, the way pytest-xdist
registers its session only when distributing), and:

* ``import tensorrt_llm...`` resolves through :class:`~regress.sandbox.shells.Sandbox`: the era's
  real modules, plus the DSA package ``__init__`` (so ``from tensorrt_llm._torch.attention.
  backends.sparse.dsa import X`` gets upstream's own re-exports), strict stubs for the rest;
* CUDA is on the CPU (:mod:`regress.sandbox.cuda`), and ``torch.cuda.is_available()`` is True,
  so tests that skip "CUDA not available" run, their ``device="cuda"`` tensors on the CPU;
* a test or test module that fails inside the sandbox (a stub, a fake, the CUDA runtime or a
  compiled operator; :mod:`regress.sandbox.blame`) is reported as skipped with the cause, never
  as upstream's failure. Everything else, import errors of upstream's own modules included, is
  upstream's verdict on itself.

The run header names the tree and the real modules; the terminal summary lists what was faked.
A run mixing upstream's tests with others is refused: the CUDA-on-CPU mode and the claim on
``tensorrt_llm`` would change how the others behave.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from regress.sandbox import Ledger
from regress.sandbox.blame import blame, describe
from regress.sandbox.eras import Settings, all_values, plan_for

#: The name :class:`SandboxedTests` is registered under.
PLUGIN_NAME = "regress-upstream-sandbox"
#: What a skipped test's reason starts with.
GAP = "regress sandbox gap"


def _inside(arg: str, checkout: Path, cwd: Path) -> bool:
    path = Path(arg.split("::", 1)[0])
    path = (path if path.is_absolute() else cwd / path).resolve()
    return path == checkout or checkout in path.parents


def register(config: pytest.Config, source: Path) -> SandboxedTests | None:
    """Install :class:`SandboxedTests` when the run's test paths lie inside ``source``."""
    from regress.tree.source import SourceTreeError, resolve_source_tree

    cwd = Path(config.invocation_params.dir)
    checkout = (source if source.is_absolute() else cwd / source).resolve()
    if checkout.name == "tensorrt_llm":  # the package directory given instead of the checkout
        checkout = checkout.parent
    inside = [_inside(a, checkout, cwd) for a in config.args]
    if not any(inside):
        return None  # regress's own tests that take the trtllm_src fixture
    if not all(inside):
        outside = [a for a, i in zip(config.args, inside, strict=True) if not i]
        raise pytest.UsageError(
            f"--trtllm-src {source}: {', '.join(outside)} lie outside the tree; run upstream's "
            "tests (paths inside it) and other tests in separate pytest runs"
        )
    try:
        tree = resolve_source_tree(checkout)
    except SourceTreeError as exc:
        raise pytest.UsageError(f"--trtllm-src: {exc}") from None
    plugin = SandboxedTests(tree)
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    plugin.start()
    return plugin


@contextlib.contextmanager
def cuda_present(ledger: Ledger, sm: int) -> Iterator[None]:
    """``torch.cuda`` says one device of ``sm`` is there; calls that need a real one still fail.

    Only the queries tests ask before choosing a device: availability, count, capability, name,
    and ``synchronize()`` (a no-op: the CPU is synchronous). Streams, events, graphs and memory
    queries still raise inside ``torch.cuda``, which :mod:`regress.sandbox.blame` calls a gap.
    """
    import torch

    def noted(name: str, value: Any) -> Any:
        def fake(*args: Any, **kwargs: Any) -> Any:
            ledger.note("cuda", f"torch.cuda.{name}", f"returns {value!r} (CUDA on the CPU)")
            return value

        return fake

    patches = {
        "is_available": noted("is_available", True),
        "device_count": noted("device_count", 1),
        "get_device_capability": noted("get_device_capability", (sm // 10, sm % 10)),
        "get_device_name": noted("get_device_name", "CPU (regress sandbox)"),
        "synchronize": noted("synchronize", None),
    }
    saved = {name: getattr(torch.cuda, name) for name in patches}
    for name, fn in patches.items():
        setattr(torch.cuda, name, fn)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.cuda, name, fn)


class SandboxedTests:
    """The pytest plugin object of a run of upstream's tests (see the module docstring)."""

    def __init__(self, tree: Any) -> None:
        from regress.sandbox.shells import Sandbox
        from regress.tree.source import module_name

        self.settings = Settings()
        self.plan = plan_for(tree)
        self.era = tree.era.name
        real = list(self.plan.real)
        package_init = tree.era.package_init
        if package_init:  # era B/C: the DSA package re-exports the metadata and its helpers
            real.append(module_name(tree.package_dir, tree.package_dir / package_init))
        self.ledger = Ledger()
        self.sandbox = Sandbox(
            self.plan.checkout,
            real,
            all_values(self.plan, self.settings),
            env=self.plan.session_env(self.settings.fused),
            ledger=self.ledger,
        )
        self.gaps: list[str] = []
        self._stack = contextlib.ExitStack()

    @property
    def root(self) -> Path:
        return self.sandbox.checkout

    def start(self) -> None:
        self._stack.enter_context(self.sandbox)
        self._stack.enter_context(cuda_present(self.ledger, self.settings.sm))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._stack.close()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return [
            f"regress sandbox: tensorrt_llm from {self.root} (era {self.era}), CUDA on the CPU, "
            f"real modules: {', '.join(sorted(self.sandbox.real))}"
        ]

    def _gap(self, exc: BaseException) -> str | None:
        if isinstance(exc, pytest.Collector.CollectError) and exc.__cause__ is not None:
            exc = exc.__cause__
        found = blame(exc, self.root)
        if found.owner not in ("sandbox", "runtime"):
            return None
        reason = f"{GAP}: {describe(exc, found)}"
        self.gaps.append(reason)
        return reason

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        report = yield
        call = report.__dict__.get("call")
        if report.failed and call is not None and call.excinfo is not None:
            reason = self._gap(call.excinfo.value)
            if reason:
                report.outcome, report.longrepr = "skipped", (str(collector.path), 0, reason)
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report = yield
        if report.failed and call.excinfo is not None:
            reason = self._gap(call.excinfo.value)
            if reason:
                line = (item.location[1] or 0) + 1
                report.outcome, report.longrepr = "skipped", (str(item.path), line, reason)
        return report

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        kinds: dict[str, int] = {}
        for fake in self.ledger.fakes.values():
            kinds[fake.kind] = kinds.get(fake.kind, 0) + 1
        faked = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        terminalreporter.write_sep("-", "regress sandbox")
        terminalreporter.write_line(
            f"real modules executed: {', '.join(self.ledger.real_modules) or 'none'}"
        )
        terminalreporter.write_line(f"faked: {faked or 'nothing'}")
        terminalreporter.write_line(f"skipped as sandbox gaps: {len(self.gaps)}")
