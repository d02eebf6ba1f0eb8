"""``regress defects``: list the replayable historical defects, or run the contract battery."""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--check", is_flag=True, help="Run the DSA contract battery and report violations.")
@click.option(
    "--defect",
    "defects",
    multiple=True,
    metavar="NAME",
    help="With --check: switch this defect on (repeatable; default: REGRESS_DEFECTS).",
)
@click.option("--device", default="cpu", show_default=True, help="Torch device for --check.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def defects(check: bool, defects: tuple[str, ...], device: str, as_json: bool) -> None:
    """List the historical defects the reference engine can replay.

    With --check, run every contract scenario (draft-loop collapse, tree rewrites, upstream
    unit-test layouts, layer-wise announcements) and exit 1 if any contract is violated.
    """
    from regress.reference.defects import DEFECTS, validate_defects

    if not check:
        if as_json:
            click.echo(json.dumps([vars(d) for d in DEFECTS.values()], indent=2))
            return
        for d in DEFECTS.values():
            click.echo(
                f"{d.name}\n  {d.summary}\n  upstream: {d.upstream}\n  symptom: {d.symptom}\n"
            )
        return

    from regress.reference.scenarios import run_contract_battery

    chosen = validate_defects(defects) if defects else None
    violations = run_contract_battery(defects=chosen, device=device)
    if as_json:
        click.echo(json.dumps([v.to_dict() for v in violations], indent=2))
    else:
        for v in violations:
            click.echo(f"VIOLATION [{v.check}] {v.details.get('scenario')}: {v.message}")
        click.echo(f"{len(violations)} contract violation(s)")
    if violations:
        raise SystemExit(1)
