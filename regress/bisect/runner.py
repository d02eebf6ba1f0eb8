"""Running the probe at a commit: checkout, overlay, build, probe, in parallel job slots.

Each job slot is a private clone (:class:`regress.bisect.git.Workspace`) pinned to one GPU when
``--gpus`` is given. Builds and probes run with cwd = the slot, ``REGRESS_COMMIT`` and
``REGRESS_WORKTREE`` set, in their own process group so a timeout, Ctrl-C or SIGTERM kills the
whole tree, optionally behind a launcher argv prefix (``srun --gpus=1 ...``) so each job can be a
Slurm step. While one runs, its group is registered with the guardian (ended if regress is
killed with -9) and its pid is recorded in the slot (ended by the next run, should the guardian
be gone too): see :mod:`regress.processes`.
Each run's stdout and stderr land in ``<name>.log`` and ``<name>.err``; the probe classifies the
whole output, then each file is cut to :data:`LOG_BYTES` (head and tail kept, the cut noted).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from regress.bisect.causes import CAUSE, DID_NOT_RUN, SHELL_NOT_RUN, Cause
from regress.bisect.git import Workspace
from regress.bisect.probes import Finished, Probe
from regress.bisect.verdicts import Outcome, Verdict
from regress.errors import UsageError
from regress.files import write_atomic
from regress.guardian import guardian
from regress.processes import kill_group, record_process

#: Bytes kept of each stream of each run (a chatty probe once left 194 MB after 11 runs).
LOG_BYTES = 1 << 20
#: Share of :data:`LOG_BYTES` kept from the start of a cut log; the rest is its end, where the
#: error that decided the run usually is.
LOG_HEAD_SHARE = 0.25


def parse_launcher(text: str | None) -> list[str]:
    """``--launcher`` as an argv prefix, split like a POSIX shell would split it.

    Raises:
        UsageError: unbalanced quotes or a trailing escape.
    """
    if not text:
        return []
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise UsageError(
            f"--launcher {text!r}: {exc}; quote it as one shell word list, e.g. "
            "--launcher 'srun --gpus=1'"
        ) from exc


def cap_log(path: Path, limit: int = LOG_BYTES) -> None:
    """Cut ``path`` to about ``limit`` bytes, keeping its head and tail and saying what was cut."""
    size = path.stat().st_size
    if size <= limit:
        return
    head = int(limit * LOG_HEAD_SHARE)
    tail = limit - head
    with open(path, "rb") as fh:
        first = fh.read(head)
        fh.seek(size - tail)
        last = fh.read(tail)
    note = (
        f"\n[regress: {size - head - tail} bytes cut here; kept the first {head} and the last "
        f"{tail} of {size} bytes]\n"
    )
    write_atomic(path, first + note.encode() + last)


@dataclass(frozen=True)
class Overlay:
    """A file or directory copied into every worktree (a new test, a probe script)."""

    source: Path
    dest: str  # relative to the worktree root

    @classmethod
    def parse(cls, spec: str, repo_root: Path) -> Overlay:
        """``SRC[:DEST]``; DEST defaults to SRC's path inside the repository, else its name."""
        src_text, _, dest = spec.partition(":")
        source = Path(src_text).expanduser().resolve()
        if not source.exists():
            raise UsageError(f"--overlay {spec!r}: {source} does not exist")
        if not dest:
            try:
                dest = str(source.relative_to(repo_root.resolve()))
            except ValueError:
                dest = source.name
        if Path(dest).is_absolute() or ".." in Path(dest).parts:
            raise UsageError(
                f"--overlay {spec!r}: DEST must be a relative path inside the worktree"
            )
        return cls(source, dest)

    def digest(self) -> str:
        """Content hash, so a changed overlay is a new probe configuration."""
        h = hashlib.sha256()
        files = sorted(self.source.rglob("*")) if self.source.is_dir() else [self.source]
        for f in files:
            if f.is_file():
                h.update(str(f.relative_to(self.source.parent)).encode())
                h.update(f.read_bytes())
        return h.hexdigest()[:16]

    def apply(self, worktree: Path) -> None:
        target = worktree / self.dest
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.source.is_dir():
            shutil.copytree(self.source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(self.source, target)


@dataclass
class ProbeRunnerConfig:
    """How to run the probe; see ``regress bisect run --help`` for each option."""

    command: list[str]
    build: str | None = None
    overlays: list[Overlay] = field(default_factory=list)
    timeout: float | None = None
    launcher: list[str] = field(default_factory=list)
    jobs: int = 1
    gpus: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    log_bytes: int = LOG_BYTES

    def __post_init__(self) -> None:
        if not self.command:
            raise UsageError("no probe command: give it after `--`, e.g. `-- ./probe.sh`")
        if self.gpus is not None and len(self.gpus) < self.jobs:
            raise UsageError(
                f"--gpus lists {len(self.gpus)} GPUs for --jobs {self.jobs}: give one per job"
            )
        if self.timeout is not None and self.timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")


EnvHook = Callable[[str, Path], dict[str, str]]


class ProbeRunner:
    """Runs the probe at commits, one per job slot, and classifies each run.

    Args:
        workspace: the slots to check commits out in.
        probe: classifies finished runs.
        config: command, build, overlays, timeout, launcher, jobs, GPUs.
        logs: directory for each run's captured output.
        env_hook: per-commit extra environment (a recipe's, e.g. where the commit keeps a module).
    """

    def __init__(
        self,
        workspace: Workspace,
        probe: Probe,
        config: ProbeRunnerConfig,
        logs: Path,
        env_hook: EnvHook | None = None,
    ) -> None:
        self.workspace = workspace
        self.probe = probe
        self.config = config
        self.logs = logs
        self.env_hook = env_hook
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._runs = 0
        self._stopping = False
        self._session = time.strftime("%Y%m%d-%H%M%S")  # log names stay unique across resumes

    def run_many(
        self,
        shas: Sequence[str],
        on_done: Callable[[int, Outcome], None] | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> list[Outcome]:
        """One run per sha, ``jobs`` at a time, one slot each; results in input order.

        ``on_done(index, outcome)`` is called in the calling thread as each run finishes, so the
        caller can persist it at once: a kill -9 then loses only the runs still in flight.
        ``on_start(index)`` is called in the calling thread as each run is started, so a user
        watching a 10-minute probe knows what it is doing from the first second.
        """
        done = on_done or (lambda _i, _o: None)
        begin = on_start or (lambda _i: None)
        out: dict[int, Outcome] = {}
        if len(shas) <= 1 or self.config.jobs == 1:
            for i, sha in enumerate(shas):
                begin(i)
                out[i] = self.run(0, sha)
                done(i, out[i])
            return [out[i] for i in range(len(shas))]
        for start in range(0, len(shas), self.config.jobs):
            batch = shas[start : start + self.config.jobs]
            pool = ThreadPoolExecutor(max_workers=len(batch))
            try:
                for slot in range(len(batch)):
                    begin(start + slot)
                futures = {
                    pool.submit(self.run, slot, sha): start + slot for slot, sha in enumerate(batch)
                }
                for fut in as_completed(futures):
                    out[futures[fut]] = fut.result()
                    done(futures[fut], out[futures[fut]])
            except BaseException:
                # Ctrl-C lands here in the main thread: kill the jobs' process groups first,
                # or shutting the pool down would wait for probes nobody wants any more.
                self.stop()
                raise
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        return [out[i] for i in range(len(shas))]

    def run(self, slot: int, sha: str) -> Outcome:
        start = time.monotonic()
        with self._lock:
            self._runs += 1
            run_id = self._runs
        worktree = self.workspace.checkout(slot, sha)
        for overlay in self.config.overlays:
            overlay.apply(worktree)
        env = self._env(slot, sha, worktree)
        name = f"{sha[:12]}-{self._session}-{run_id}"
        self.logs.mkdir(parents=True, exist_ok=True)
        if self.config.build:
            build = self._exec(
                [*self.config.launcher, "sh", "-c", self.config.build],
                worktree,
                env,
                self.logs / f"{name}-build",
                slot,
            )
            if build.exit_code != 0:
                return self._build_failed(build, start, self.logs / f"{name}-build.log")
        scratch = self.logs / f"scratch-{run_id}"
        scratch.mkdir(parents=True, exist_ok=True)
        argv = [*self.config.launcher, *self.probe.argv(self.config.command, scratch)]
        finished = self._exec(argv, worktree, env, self.logs / name, slot)
        finished.scratch = scratch
        outcome = self.probe.classify(finished)
        if finished.timed_out and outcome.verdict is Verdict.SKIP:
            outcome.reason = f"timeout after {self.config.timeout:g}s"
        outcome.seconds = time.monotonic() - start
        outcome.log = str(self.logs / f"{name}.log")
        shutil.rmtree(scratch, ignore_errors=True)
        return outcome

    def _build_failed(self, build: Finished, start: float, log: Path) -> Outcome:
        """A skip; never replayed when the build command itself could not run."""
        details: dict[str, object] = {"build_failed": True, CAUSE: Cause.BUILD_FAILED.value}
        if build.timed_out:
            why = "timeout"
        elif build.exit_code is None:
            why = f"could not start: {build.error}"
            details[DID_NOT_RUN] = "the build could not start"
        else:
            why = f"exit {build.exit_code}"
            if build.exit_code in SHELL_NOT_RUN:
                why += f", {SHELL_NOT_RUN[build.exit_code]}"
                details[DID_NOT_RUN] = f"the build command: {SHELL_NOT_RUN[build.exit_code]}"
        return Outcome(
            Verdict.SKIP,
            f"build failed ({why})",
            exit_code=build.exit_code,
            seconds=time.monotonic() - start,
            log=str(log),
            details=details,
        )

    def _env(self, slot: int, sha: str, worktree: Path) -> dict[str, str]:
        env = guardian().child_env()  # marked: ended with regress, however it dies
        env.update(self.config.env)
        env.update(REGRESS_COMMIT=sha, REGRESS_WORKTREE=str(worktree), REGRESS_JOB=str(slot))
        if self.config.gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.config.gpus[slot]
        if self.env_hook:
            env.update(self.env_hook(sha, worktree))
        return env

    def _exec(
        self, argv: list[str], cwd: Path, env: dict[str, str], log_base: Path, slot: int
    ) -> Finished:
        out_path = log_base.parent / f"{log_base.name}.log"
        err_path = log_base.parent / f"{log_base.name}.err"
        record = self.workspace.probe_record(slot)
        timed_out = False
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            with self._lock:
                if self._stopping:
                    return Finished(exit_code=None, error="interrupted")
                try:
                    proc = subprocess.Popen(
                        argv,
                        cwd=cwd,
                        env=env,
                        stdout=out,
                        stderr=err,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                except OSError as exc:
                    # the OS's words, not Python's "[Errno 2] ..." rendering of them
                    said = f"{exc.strerror}: {exc.filename or argv[0]}" if exc.strerror else exc
                    return Finished(exit_code=None, error=str(said), errno=exc.errno)
                self._live.add(proc)
            guardian().watch_group(proc.pid)
            try:
                record_process(record, proc, commit=env.get("REGRESS_COMMIT", ""))
                proc.wait(timeout=self.config.timeout)
                # what the probe left in the background (`server &`) ends with it
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(proc)
            except BaseException:
                # Ctrl-C: the probe runs in its own session, so the terminal's SIGINT never
                # reached it; take its whole group down before unwinding.
                kill_group(proc)
                raise
            finally:
                with self._lock:
                    self._live.discard(proc)
                with contextlib.suppress(OSError):
                    record.unlink()
                guardian().release_group(proc.pid)
        finished = Finished(
            exit_code=proc.returncode,
            stdout=out_path.read_text(errors="replace"),
            stderr=err_path.read_text(errors="replace"),
            timed_out=timed_out,
        )
        for path in (out_path, err_path):
            cap_log(path, self.config.log_bytes)
        return finished

    def stop(self) -> None:
        """Kill every running build or probe with its process group and start no new one."""
        with self._lock:
            self._stopping = True
            live = list(self._live)
        for proc in live:
            kill_group(proc)
