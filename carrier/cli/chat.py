"""``carrier chat``: talk to a persona in the terminal, interactively or from piped input."""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from carrier.cli._common import err, load_or_exit, quiet_ml, setup_logging

if TYPE_CHECKING:
    from carrier.character import Character
    from carrier.settings import Settings

__all__ = ["chat"]


def chat(
    character_path: Annotated[Path, typer.Argument(metavar="CHARACTER", help="A character file.")],
    user: Annotated[str | None, typer.Option(help="Your name in the conversation.")] = None,
    stream: Annotated[bool, typer.Option(help="Show the reply while it is written.")] = True,
    show_thought: Annotated[
        bool, typer.Option(help="Also print the agent's private reasoning.")
    ] = False,
) -> None:
    """Talk to a persona in the terminal (reads piped stdin too). Memory persists across runs."""
    quiet_ml()
    from carrier.datadir import private_data_dir
    from carrier.settings import load_settings

    settings = private_data_dir(load_settings())
    setup_logging(settings.log_level if settings.log_level.upper() != "INFO" else "WARNING")
    character = load_or_exit(character_path)
    name = user or os.environ.get("CARRIER_USER") or _login_name()
    try:
        asyncio.run(_chat(character, settings, name, stream=stream, show_thought=show_thought))
    except KeyboardInterrupt:
        err("")


def _login_name() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "user"


async def _chat(
    character: Character, settings: Settings, user: str, *, stream: bool, show_thought: bool
) -> None:
    from carrier.assemble import (
        build_runtime,
        default_embedder,
        load_embedder,
        offline_summary,
        open_store,
    )
    from carrier.cli._progress import working
    from carrier.types import Author, Channel, Message, RoomKind

    interactive = sys.stdin.isatty()
    store = await open_store(settings)
    try:
        embedder = default_embedder()
        runtime, choice = build_runtime(
            character, settings=settings, store=store, embedder=embedder, environ=os.environ
        )
        if choice.offline:
            err(f"carrier: {offline_summary([(character.name, choice.note)])}")
        else:
            err(f"carrier: {character.name}: {choice.description}")
        # Seconds of silence otherwise, before the first prompt: torch and the model load.
        with working("loading the embedding model"):
            await load_embedder(embedder)
        with working(f"starting {character.name}"):
            await runtime.start()
        author = Author(platform_id=user, name=user)
        channel = Channel(platform_id=f"terminal:{user}", name="terminal", kind=RoomKind.CLI)
        loop = asyncio.get_running_loop()
        while True:
            if interactive:
                line = await loop.run_in_executor(None, _prompt, "you> ")
            else:
                line = await loop.run_in_executor(None, sys.stdin.readline)
            if line is None or line == "":
                break
            text = line.strip()
            if not text:
                continue
            if interactive and text in ("/quit", "/exit"):
                break
            message = Message(platform="cli", author=author, channel=channel, text=text)
            typer.echo(f"{character.name}: ", nl=False)
            streamed: list[str] = []

            async def show(piece: str, _streamed: list[str] = streamed) -> None:
                _streamed.append(piece)
                sys.stdout.write(piece)
                sys.stdout.flush()

            result = await runtime.handle(message, on_chunk=show if stream else None)
            shown = "".join(streamed)
            if not result.replies:
                typer.echo(f"({result.reason or 'no reply'})" if not shown else "")
            else:
                first = result.replies[0].content.text
                rest = [m.content.text for m in result.replies[1:]]
                if shown.strip() != first.strip():
                    # A hook changed the text, or the model did not stream: print the stored reply.
                    if shown:
                        typer.echo("")
                        typer.echo(f"{character.name}: ", nl=False)
                    typer.echo(first)
                else:
                    typer.echo("")
                for text_part in rest:
                    typer.echo(f"{character.name}: {text_part}")
            if show_thought and result.thought:
                typer.echo(f"  (thought: {result.thought})")
        await runtime.stop()
    finally:
        await store.close()


def _prompt(label: str) -> str | None:
    try:
        return input(label) + "\n"
    except EOFError:
        return None
