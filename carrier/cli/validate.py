"""``carrier validate`` and ``carrier import-card``: character files checked and converted."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from carrier.cli._common import err

__all__ = ["import_card", "validate"]


def validate(
    paths: Annotated[list[Path], typer.Argument(help="Character files or folders of them.")],
    strict: Annotated[
        bool, typer.Option("--strict", help="Treat warnings as errors (exit 1 if any).")
    ] = False,
) -> None:
    """Check character files and report every problem in every file (exit 1 if any).

    Problems include client options (`clientConfig.<name>`) the installed client refuses.
    Warnings name what loads but will not act as written: a client or model provider Carrier
    does not have, a missing knowledge path, ElizaOS settings Carrier ignores, a YAML value cut
    by a `#` comment. They do not change the exit code unless --strict is given.
    """
    from carrier.character import check_paths
    from carrier.client_checks import character_config_problems
    from carrier.clients import discover_clients

    factories = discover_clients()  # client sections are checked against their settings
    results = check_paths(
        paths,
        problems_of=lambda character: character_config_problems(character, factories),
    )
    if not results:
        err("no character files found in: " + ", ".join(str(p) for p in paths))
        raise typer.Exit(1)
    failed = warned = 0
    for file, (problems, warnings) in results.items():
        counts = [f"{len(problems)} problem(s)"] if problems else []
        counts += [f"{len(warnings)} warning(s)"] if warnings else []
        if problems or (strict and warnings):
            failed += 1
            typer.echo(f"FAIL {file}: {', '.join(counts)}")
        else:
            typer.echo(f"ok   {file}" + (f": {counts[0]}" if counts else ""))
        for problem in problems:
            typer.echo(f"  - {problem}")
        for warning in warnings:
            typer.echo(f"  warn {warning}")
        warned += len(warnings)
    summary = f"{len(results) - failed} ok, {failed} with problems, {warned} warning(s)"
    if strict and warned:
        summary += " (--strict: warnings count as problems)"
    typer.echo(summary)
    if failed:
        raise typer.Exit(1)


def import_card(
    card: Annotated[Path, typer.Argument(help="A Character Card V2/V3 (.json or .png).")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Where to write (.yaml or .json).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
) -> None:
    """Convert a Character Card into a Carrier persona file."""
    from carrier.character import dump_character
    from carrier.character import import_card as read_card
    from carrier.errors import CharacterError

    try:
        character = read_card(card)
    except CharacterError as exc:
        err(str(exc))
        raise typer.Exit(2) from None
    if output is None:
        slug = (
            "".join(ch if ch.isalnum() else "-" for ch in character.name.lower()).strip("-")
            or "character"
        )
        output = Path("characters") / f"{slug}.yaml"
    if output.exists() and not force:
        err(f"{output} exists; pass --force to overwrite it or -o to choose another file")
        raise typer.Exit(1)
    output.parent.mkdir(parents=True, exist_ok=True)
    dump_character(character, output)
    typer.echo(f"wrote {output} ({character.name})")
