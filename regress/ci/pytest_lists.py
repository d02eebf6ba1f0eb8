"""The list-and-waive half of regress's pytest plugin: ``--test-list``/``--stage``/``--waives``.

Registered by :mod:`regress.pytest_plugin` as a plugin object only when one of those options is
given. Selection and waives are the library's (:mod:`regress.ci.selection`,
:mod:`regress.ci.waives`); this module binds them to pytest items: it evaluates a line's
``-k``/``-m`` expressions with pytest's own matchers, applies waives as markers, and records
``TIMEOUT``/``ISOLATION`` in JUnit (enforcing them where pytest-timeout / pytest-forked are
installed; upstream enforces ISOLATION by running such tests in their own pytest process).
"""

from __future__ import annotations

from pathlib import Path

import pytest


def collection_error(config: pytest.Config, nodeid: str, message: str) -> None:
    from _pytest.reports import CollectReport

    report = CollectReport(nodeid, "failed", message, [])
    config.hook.pytest_collectreport(report=report)


def drop_all(config: pytest.Config, items: list[pytest.Item]) -> None:
    if items:
        config.hook.pytest_deselected(items=list(items))
    items[:] = []


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
                collection_error(
                    config,
                    self.source or "--test-list",
                    "test list entries match no collected test (fix or remove them; "
                    "`regress testlist validate` checks every list):\n" + "\n".join(lines),
                )
                drop_all(config, items)
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
