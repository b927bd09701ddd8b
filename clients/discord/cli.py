"""``carrier discord ...``: mounted by the core CLI from the ``carrier.cli`` entry-point group
(the core never imports ``clients``), so the command exists only where the client is installed."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app"]

app = typer.Typer(help="Discord client tools.", no_args_is_help=True, add_completion=False)


@app.callback()
def _group() -> None:
    """Discord client tools."""  # a callback keeps `sync` a subcommand even while it is alone


def _environ() -> dict[str, str]:
    """The process environment over ``.env`` (the token may live in either)."""
    from dotenv import dotenv_values

    from_file = {k: v for k, v in dotenv_values(".env").items() if v is not None}
    return {**from_file, **os.environ}


@app.command("sync")
def sync(
    character: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="Character whose DISCORD_API_TOKEN to use."
        ),
    ],
    guild: Annotated[
        int | None,
        typer.Option("--guild", help="Register in this server only (instant); default: globally."),
    ] = None,
) -> None:
    """Register the slash commands (/ask, /persona, /forget, /mute, /unmute) with Discord.

    Run it once after inviting the bot and again after upgrading Carrier.

    It is not done on every start: global registration is rate limited and slow to spread.
    """
    from carrier.character import load_character
    from carrier.errors import CarrierError
    from clients.discord import sync_for_character

    try:
        persona = load_character(character)
        names = asyncio.run(sync_for_character(persona, _environ(), guild))
    except CarrierError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    where = f"to server {guild}" if guild is not None else "globally (may take a while to appear)"
    typer.echo(f"{persona.name}: synced {' '.join('/' + n for n in names)} {where}")
