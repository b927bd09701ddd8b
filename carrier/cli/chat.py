"""``carrier chat``: talk to a persona in the terminal, interactively or from piped input.

One bad turn never ends the chat: a message the model could not answer (after its retries and
fallbacks, or at the turn deadline) gets one line on stderr saying why, and the next line is
read. Piped input is read to its end."""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from carrier.cli._common import err, load_or_exit, quiet_ml, setup_logging

if TYPE_CHECKING:
    from carrier.character import Character
    from carrier.runtime import AgentRuntime
    from carrier.settings import Settings
    from carrier.types import Memory, Message

__all__ = ["chat"]


def chat(
    character_path: Annotated[Path, typer.Argument(metavar="CHARACTER", help="A character file.")],
    user: Annotated[str | None, typer.Option(help="Your name in the conversation.")] = None,
    stream: Annotated[bool, typer.Option(help="Show the reply while it is written.")] = True,
    show_thought: Annotated[
        bool, typer.Option(help="Also print the agent's private reasoning.")
    ] = False,
) -> None:
    """Talk to a persona in the terminal (reads piped stdin too). Memory persists across runs.

    A message the model cannot answer gets one line on stderr, and the chat goes on.
    Exit status: 0, or 1 when every message failed.
    """
    quiet_ml()
    from carrier.datadir import private_data_dir
    from carrier.settings import load_settings

    settings = private_data_dir(load_settings())
    setup_logging(settings.log_level if settings.log_level.upper() != "INFO" else "WARNING")
    character = load_or_exit(character_path)
    name = user or os.environ.get("CARRIER_USER") or _login_name()
    try:
        tally = asyncio.run(
            _chat(character, settings, name, stream=stream, show_thought=show_thought)
        )
    except KeyboardInterrupt:
        err("")
        return
    if tally.turns and tally.failed == tally.turns:
        raise typer.Exit(1)


def _login_name() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "user"


@dataclass
class _Tally:
    turns: int = 0
    failed: int = 0


async def _chat(
    character: Character, settings: Settings, user: str, *, stream: bool, show_thought: bool
) -> _Tally:
    from carrier.assemble import (
        build_runtime,
        default_embedder,
        load_embedder,
        offline_summary,
        open_store,
    )
    from carrier.cli._progress import working
    from carrier.serving import Platforms
    from carrier.types import Author, Channel, Message, RoomKind

    interactive = sys.stdin.isatty()
    tally = _Tally()
    store = await open_store(settings)
    try:
        embedder = default_embedder(settings)
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
            # The model's library loads here too. A terminal settles only the terminal's turns:
            # a server or worker beside it serves the others.
            await runtime.start(recover=Platforms.of("cli"))
        author = Author(platform_id=user, name=user)
        channel = Channel(platform_id=f"terminal:{user}", name="terminal", kind=RoomKind.CLI)
        await _show_left(runtime, character.name, channel.platform_id)
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
            tally.turns += 1
            if not await _turn(
                runtime, message, character.name, stream=stream, show_thought=show_thought
            ):
                tally.failed += 1
        await runtime.stop()
    finally:
        await store.close()
    return tally


async def _turn(
    runtime: AgentRuntime, message: Message, name: str, *, stream: bool, show_thought: bool
) -> bool:
    """One message: the reply on stdout (streamed as it is written), or one line on stderr
    saying why there is none. False when the turn failed."""
    from carrier.types import MemoryStatus

    streamed: list[str] = []

    async def show(piece: str) -> None:
        if not streamed:
            sys.stdout.write(f"{name}: ")
        streamed.append(piece)
        sys.stdout.write(piece)
        sys.stdout.flush()

    try:
        result = await runtime.handle(message, on_chunk=show if stream else None)
    except Exception as exc:  # the turn is lost, the chat is not
        if streamed:
            typer.echo("")
        err(f"carrier: no answer this time: {_explain(exc)}")
        return False
    shown = "".join(streamed)
    if result.status is MemoryStatus.FAILED:
        if shown:
            typer.echo("")
        err(f"carrier: no answer this time: {result.reason or 'the turn failed'}")
        return False
    if not result.replies:
        typer.echo("" if shown else f"{name}: ({result.reason or 'no reply'})")
    else:
        first = result.replies[0].content.text
        if not shown:
            typer.echo(f"{name}: {first}")
        elif shown.strip() != first.strip():
            # A hook changed the text after it streamed: print the stored reply.
            typer.echo("")
            typer.echo(f"{name}: {first}")
        else:
            typer.echo("")
        for reply in result.replies[1:]:
            typer.echo(f"{name}: {reply.content.text}")
    if show_thought and result.thought:
        typer.echo(f"  (thought: {result.thought})")
    await runtime.outbox.deliver(result.replies)  # printed: sent
    return True


def _explain(exc: BaseException) -> str:
    """A failure in a few words, no exception names: Carrier's errors say what happened; any
    other is a bug, whose traceback the log has just shown."""
    from carrier.errors import CarrierError

    if isinstance(exc, CarrierError):
        return str(exc).splitlines()[0] if str(exc) else "the turn failed"
    return "an unexpected error (the log above has the details)"


async def _show_left(runtime: AgentRuntime, name: str, terminal: str) -> None:
    """Print the replies a stopped session stored but never printed (still fresh), once."""
    from carrier.types import stable_id

    async def show(reply: Memory) -> None:
        typer.echo(f"{name}: {reply.content.text}")

    room = stable_id(runtime.agent_id, "cli", "room", terminal)
    await runtime.outbox.redeliver("cli", show, rooms={room})


def _prompt(label: str) -> str | None:
    try:
        return input(label) + "\n"
    except EOFError:
        return None
