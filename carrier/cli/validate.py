"""``carrier validate`` and ``carrier import-card``: character files checked and converted."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from carrier.cli._common import err

__all__ = ["import_card", "validate"]


def validate(
    paths: Annotated[list[Path], typer.Argument(help="Character files or folders of them.")],
) -> None:
    """Check character files and report every problem in every file (exit 1 if any)."""
    from carrier.character import validate_paths

    results = validate_paths(paths)
    if not results:
        err("no character files found in: " + ", ".join(str(p) for p in paths))
        raise typer.Exit(1)
    bad = 0
    for file, problems in results.items():
        if problems:
            bad += 1
            typer.echo(f"FAIL {file}: {len(problems)} problem(s)")
            for problem in problems:
                typer.echo(f"  - {problem}")
        else:
            typer.echo(f"ok   {file}")
    typer.echo(f"{len(results) - bad} ok, {bad} with problems")
    if bad:
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
