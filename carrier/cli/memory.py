"""``carrier memory ...``: list, search, export, import and forget an agent's memories.

Loaded by the main CLI only when ``carrier memory`` runs. The store is the one
the settings name (``CARRIER_MONGODB_URI``, else the SQLite file in ``CARRIER_DATA_DIR``). The agent
is given as a character file, an agent id or an agent name. Heavy imports (the embedding model)
happen only in the commands that embed (search, import), so ``carrier --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO, TypeVar

import typer

from carrier.cli._common import run_or_exit

if TYPE_CHECKING:
    from carrier.memory.base import Store
    from carrier.memory.embedder import Embedder
    from carrier.types import Memory, MemoryKind, ScoredMemory

__all__ = ["memory_app"]

T = TypeVar("T")

memory_app = typer.Typer(
    name="memory",
    help="An agent's memories: list, search, export, import, and forget a person.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

MAX_ERRORS_SHOWN = 50

AgentOption = Annotated[
    str,
    typer.Option(
        "--agent", "-a", help="The agent: a character file, an agent id or an agent name."
    ),
]


def _with_store(action: Callable[[Store], Awaitable[T]]) -> T:
    """Open the configured store, run ``action``, close it; errors exit non-zero with a message."""
    from carrier.assemble import open_store
    from carrier.settings import load_settings

    async def main() -> T:
        store = await open_store(load_settings())
        try:
            return await action(store)
        finally:
            await store.close()

    return run_or_exit(main())


def _with_agent(agent: str, action: Callable[[Store, str], Awaitable[T]]) -> T:
    """:func:`_with_store`, with the agent resolved to its id: a character file's agent, else an
    agent id or name known to the store."""
    from carrier.lookup import resolve_agent

    async def run(store: Store) -> T:
        return await action(store, (await resolve_agent(store, agent)).id)

    return _with_store(run)


def _kinds(values: list[str] | None) -> list[MemoryKind] | None:
    from carrier.types import MemoryKind

    if not values:
        return None
    try:
        return [MemoryKind(v.lower()) for v in values]
    except ValueError:
        choices = ", ".join(k.value for k in MemoryKind)
        raise typer.BadParameter(f"use one of {choices}", param_hint="--kind") from None


def _embedder() -> Embedder:
    for key, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("TOKENIZERS_PARALLELISM", "false"),
    ):
        os.environ.setdefault(key, value)
    from carrier.assemble import default_embedder

    return default_embedder()


def _short(text: str, width: int = 70) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _who(memory: Memory) -> str:
    return str(memory.content.metadata.get("speaker") or memory.entity_id)


def _print_table(memories: list[Memory], scores: list[float] | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    columns = ["created (UTC)", "kind", "id", "who", "text"]
    table = Table(*(["score"] if scores is not None else []), *columns)
    for i, m in enumerate(memories):
        row = [
            m.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            m.kind.value,
            m.id,
            _who(m),
            _short(m.content.text),
        ]
        table.add_row(*([f"{scores[i]:.3f}"] if scores is not None else []), *row)
    Console(highlight=False, soft_wrap=False).print(table)


def _print_json(memories: list[Memory]) -> None:
    for m in memories:
        typer.echo(m.model_dump_json(exclude={"embedding", "embedding_model"}))


RoomOption = Annotated[str | None, typer.Option("--room", help="Only memories of this room id.")]
KindOption = Annotated[
    list[str] | None,
    typer.Option(
        "--kind", help="Only memories of this kind (message, fact, summary, ...; repeatable)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]


@memory_app.command("list")
def list_cmd(
    agent: AgentOption,
    room: RoomOption = None,
    kind: KindOption = None,
    entity: Annotated[
        str | None, typer.Option("--entity", help="Only memories of (or about) this entity id.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """List an agent's memories, newest first."""
    kinds = _kinds(kind)

    async def run(store: Store, agent_id: str) -> list[Memory]:
        return await store.get_memories(
            agent_id=agent_id,
            room_id=room,
            entity_id=entity,
            kinds=kinds,
            limit=limit,
            embeddings=False,
        )

    memories = _with_agent(agent, run)
    if as_json:
        _print_json(memories)
    elif not memories:
        typer.echo("no memories")
    else:
        _print_table(memories)


@memory_app.command("search")
def search_cmd(
    text: Annotated[str, typer.Argument(help="What to look for (searched by meaning).")],
    agent: AgentOption,
    room: RoomOption = None,
    kind: KindOption = None,
    k: Annotated[int, typer.Option("-k", min=1, max=200, help="How many results.")] = 10,
    as_json: JsonOption = False,
) -> None:
    """Search an agent's memories by meaning, best first."""
    kinds = _kinds(kind)
    embedder = _embedder()

    async def run(store: Store, agent_id: str) -> list[ScoredMemory]:
        vector = await embedder.embed_one(text)
        return await store.search_memories(
            agent_id=agent_id,
            embedding=vector.tolist(),
            embedding_model=embedder.model_id,
            k=k,
            room_id=room,
            kinds=kinds,
            embeddings=False,
        )

    hits = _with_agent(agent, run)
    if as_json:
        _print_json([h.memory for h in hits])
    elif not hits:
        typer.echo("nothing found")
    else:
        _print_table([h.memory for h in hits], scores=[h.score for h in hits])


@memory_app.command("export")
def export_cmd(
    agent: AgentOption,
    output: Annotated[
        str, typer.Option("-o", "--output", help="The JSON Lines file to write ('-' for stdout).")
    ],
    embeddings: Annotated[
        bool, typer.Option("--embeddings", help="Include the vectors (about 10x larger).")
    ] = False,
    room: RoomOption = None,
    kind: KindOption = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing file.")] = False,
) -> None:
    """Write an agent's memories as JSON Lines, one memory per line, newest first."""
    from carrier.memory.rights import export_memories

    kinds = _kinds(kind)

    def to(out: TextIO) -> Callable[[Store, str], Awaitable[tuple[str, int]]]:
        async def run(store: Store, agent_id: str) -> tuple[str, int]:
            count = await export_memories(
                store, out, agent_id=agent_id, embeddings=embeddings, room_id=room, kinds=kinds
            )
            return agent_id, count

        return run

    if output == "-":
        agent_id, count = _with_agent(agent, to(sys.stdout))
    else:
        target = Path(output)
        if target.exists() and not force:
            typer.echo(f"{target} exists; pass --force to overwrite it", err=True)
            raise typer.Exit(1)
        # Written beside the target and renamed at the end: a failed export leaves no half file.
        partial = target.with_name(target.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8") as out:
                agent_id, count = _with_agent(agent, to(out))
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
    typer.echo(f"exported {count} memories of agent {agent_id} to {output}", err=True)


@memory_app.command("import")
def import_cmd(
    file: Annotated[Path, typer.Argument(help="A JSON Lines file written by `memory export`.")],
    agent: AgentOption,
    embed: Annotated[
        bool, typer.Option(help="Embed memories that come without a vector, so they are recalled.")
    ] = True,
) -> None:
    """Import memories from JSON Lines.

    Ids already stored are skipped, so running it twice is safe.

    Bad lines are reported with their numbers and the rest are imported (exit 1 if any were bad).
    """
    from carrier.memory.rights import ImportReport, import_memories

    if not file.is_file():
        typer.echo(f"no file {file}", err=True)
        raise typer.Exit(1)
    embedder = _embedder() if embed else None
    with file.open(encoding="utf-8") as lines:

        async def run(store: Store, agent_id: str) -> ImportReport:
            return await import_memories(store, lines, agent_id=agent_id, embedder=embedder)

        report = _with_agent(agent, run)
    typer.echo(
        f"imported {report.imported}, already there {report.existing}, "
        f"embedded {report.embedded}, bad lines {len(report.errors)}"
    )
    for error in report.errors[:MAX_ERRORS_SHOWN]:
        typer.echo(f"{file}:{error}", err=True)
    if len(report.errors) > MAX_ERRORS_SHOWN:
        typer.echo(f"... and {len(report.errors) - MAX_ERRORS_SHOWN} more bad lines", err=True)
    if report.errors:
        raise typer.Exit(1)


@memory_app.command("forget")
def forget_cmd(
    entity_id: Annotated[
        str, typer.Argument(metavar="ENTITY_ID", help="The person's entity id (see `memory list`).")
    ],
    agent: AgentOption,
    platform: Annotated[
        str | None,
        typer.Option(
            help="ENTITY_ID is the person's id on this platform (e.g. a Discord user id with "
            "--platform discord)."
        ),
    ] = None,
    keep_replies: Annotated[
        bool, typer.Option("--keep-replies", help="Keep the agent's replies to them.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Forget a person, in every room of the agent.

    Deletes the messages they sent, the facts about them and the agent's replies to them.

    Summaries that retell them and their entity record (names, memberships) go too.
    """
    from carrier.memory.rights import ForgetReport, entity_id_for, forget_entity

    if not yes:
        typer.confirm(
            f"Delete everything agent {agent} remembers of {entity_id}? This cannot be undone",
            abort=True,
        )

    async def run(store: Store, agent_id: str) -> tuple[str, ForgetReport]:
        target = entity_id_for(agent_id, platform, entity_id) if platform else entity_id
        return target, await forget_entity(
            store, agent_id=agent_id, entity_id=target, include_replies=not keep_replies
        )

    target, report = _with_agent(agent, run)
    typer.echo(
        f"forgot {target}: {report.total} memories ({report.messages} messages, "
        f"{report.facts} facts, {report.replies} replies, {report.summaries} summaries, "
        f"{report.other} other) in {len(report.rooms)} room(s)"
        + ("; their entity record (names, platform id) too" if report.entity else "")
    )


@memory_app.command("reindex")
def reindex_cmd(
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", "-a", help="Only this agent (a character file, id or name); default: all."
        ),
    ] = None,
) -> None:
    """Re-embed memories made by another embedding model, with a progress bar.

    Vectors of different models are never compared: until then, those memories are not recalled.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from carrier.memory.reindex import ReindexProgress, reindex

    embedder = _embedder()

    async def run(store: Store) -> int:
        agent_id = None
        if agent is not None:
            from carrier.lookup import resolve_agent

            agent_id = (await resolve_agent(store, agent)).id
        with Progress(
            TextColumn("Re-embedding"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            transient=False,
        ) as bar:
            task = bar.add_task("reindex", total=None)

            def show(p: ReindexProgress) -> None:
                bar.update(task, completed=p.done, total=p.total)

            return await reindex(store, embedder, agent_id=agent_id, progress=show)

    count = _with_store(run)
    typer.echo(f"re-embedded {count} memor{'y' if count == 1 else 'ies'} with {embedder.model_id}")
