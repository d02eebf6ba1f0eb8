"""``regress defects``: list the replayable historical defects, or run the contract battery."""

from __future__ import annotations

import click

from regress.cli.output import emit_json, json_option
from regress.reference.defects import DEFECTS


@click.command()
@click.option("--check", is_flag=True, help="Run the DSA contract battery and report violations.")
@click.option(
    "--defect",
    "defects",
    multiple=True,
    metavar="NAME",
    help=f"With --check: switch this defect on (repeatable; default: REGRESS_DEFECTS): "
    f"{', '.join(DEFECTS)}.",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="Torch device for --check.",
)
@json_option("Write JSON to FILE (the text still shows); '-' or a bare --json: JSON on stdout.")
def defects(check: bool, defects: tuple[str, ...], device: str, json_out: str | None) -> None:
    """List the historical defects the reference engine can replay.

    With --check, run every contract scenario (draft-loop collapse, tree rewrites, upstream
    unit-test layouts, layer-wise announcements) and exit 1 if any contract is violated.
    """
    from regress.files import check_output_path
    from regress.reference.defects import validate_defects

    check_output_path(json_out, option="--json")
    if defects and not check:
        from regress.errors import UsageError

        raise UsageError(
            "--defect switches a defect on for --check; add --check (a plain `regress defects` "
            "lists every defect)"
        )
    if not check:
        doc = [vars(d) for d in DEFECTS.values()]
        if not emit_json(doc, json_out):
            for d in DEFECTS.values():
                caught = ", ".join(d.caught_by) or "-"
                click.echo(
                    f"{d.name}\n  {d.summary}\n  upstream: {d.upstream}\n  symptom: {d.symptom}"
                    f"\n  caught by: {caught}\n"
                )
        return

    from regress.reference.scenarios import run_contract_battery

    chosen = validate_defects(defects) if defects else None
    violations = run_contract_battery(defects=chosen, device=device)
    if not emit_json([v.to_dict() for v in violations], json_out):
        for v in violations:
            click.echo(f"VIOLATION [{v.check}] {v.details.get('scenario')}: {v.message}")
        click.echo(f"{len(violations)} contract violation(s)")
    if violations:
        raise SystemExit(1)
