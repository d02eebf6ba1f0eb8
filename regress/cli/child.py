"""``python -m regress.cli.child``: entry points of the child processes regress starts.

Not a user command: the library starts these where a separate process is the point (a bisect
probe in a worktree, a build step, a run DeepGEMM may abort) and names them by this module
(``regress.check.recipes.CHILD``, ``regress.trtllm.layerwise.CHILD``). The work is the
library's; each command here parses, calls it and turns the result into an exit code.

* ``trtllm-source-probe [PATH] [--scenario NAME] [--timeout S] [--known FILE]``: the
  ``trtllm-source`` recipe's probe, ``regress check`` as a git-bisect exit code (0 good, 1 bad,
  125 untestable).
* ``link-binaries --from DIR [--to DIR]``: the overlay recipe's build step.
* ``layerwise ARGS --out FILE``: one layer-wise shape check, a JSON line per result.
"""

from __future__ import annotations

from pathlib import Path

import click

from regress.errors import RegressError


@click.group()
def child() -> None:
    """Child processes of regress (not a user command)."""


@child.command("trtllm-source-probe")
@click.argument("path", default=".", type=click.Path(path_type=Path))
@click.option("--scenario", "scenarios", multiple=True, metavar="NAME")
@click.option("--timeout", type=float, default=None, metavar="SECONDS")
@click.option("--known", type=click.Path(path_type=Path), default=None, metavar="FILE")
def trtllm_source_probe(
    path: Path, scenarios: tuple[str, ...], timeout: float | None, known: Path | None
) -> int:
    """One trtllm-source bisect probe: regress check of PATH as 0, 1 or 125."""
    from regress.check.recipes import probe_exit_code

    code, lines = probe_exit_code(
        path, scenarios=list(scenarios) or None, timeout=timeout, known=known
    )
    for line in lines:
        click.echo(line, err=True)
    return code


@child.command("link-binaries")
@click.option("--from", "source", type=click.Path(path_type=Path), required=True)
@click.option("--to", "target", type=click.Path(path_type=Path), default=Path("tensorrt_llm"))
def link_binaries(source: Path, target: Path) -> int:
    """Link an installed wheel's binaries into ./tensorrt_llm (the overlay recipe's build)."""
    from regress.check.recipes import link_binaries as link

    made = link(source, target)
    click.echo(f"linked {len(made)} binary files from {source}")
    return 0


@child.command(
    "layerwise", context_settings={"ignore_unknown_options": True, "allow_extra_args": True}
)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def layerwise(out: Path, args: tuple[str, ...]) -> int:
    """Run one layer-wise shape check (ShapeCheck.argv() flags); exit 1 if a result failed."""
    from regress.trtllm import layerwise as lw

    return 0 if lw.run_to_file(lw.ShapeCheck.from_argv(args), out) else 1


def main(argv: list[str] | None = None) -> int:
    """Run one child command and return its exit code (a RegressError: its message and code)."""
    try:
        code = child.main(args=argv, prog_name="python -m regress.cli.child", standalone_mode=False)
    except RegressError as exc:
        click.echo(f"regress: error: {exc}", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
