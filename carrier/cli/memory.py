"""``carrier memory ...``: list, search, export, import an agent's memories; list the people it
knows and forget one; prune old ones.

Loaded by the main CLI only when ``carrier memory`` runs. The store is the one
the settings name (``CARRIER_MONGODB_URI``, else the SQLite file in ``CARRIER_DATA_DIR``). The agent
is given as a character file, an agent id or an agent name; a person as an entity id, a platform
id, a name or a username. Heavy imports (the embedding model) happen only in the commands that
embed (search, import, reindex), and the model loads under a sign of life: it takes seconds.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO, TypeVar

import typer

from carrier.cli._memory_common import (
    AgentOption,
    JsonOption,
    KindOption,
    RoomOption,
    kinds_of,
    load_model,
    make_embedder,
    names_of,
    print_json,
    with_agent,
    with_store,
)
from carrier.cli._memory_rights import forget_cmd, people_cmd, prune_cmd

if TYPE_CHECKING:
    from carrier.memory.base import Store
    from carrier.types import Memory, ScoredMemory

__all__ = ["memory_app"]

T = TypeVar("T")

memory_app = typer.Typer(
    name="memory",
    # The same line as COMMANDS["memory"] in cli/__init__.py, which --help shows without importing this.
    help="An agent's memories: list, search, export, import, prune, and forget a person.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

MAX_ERRORS_SHOWN = 50


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
    """List an agent's memories, newest first, with who each is of (name and entity id)."""
    kinds = kinds_of(kind)

    async def run(store: Store, agent_id: str) -> tuple[list[Memory], dict[str, str]]:
        memories = await store.get_memories(
            agent_id=agent_id,
            room_id=room,
            entity_id=entity,
            kinds=kinds,
            limit=limit,
            embeddings=False,
        )
        return memories, ({} if as_json else await names_of(store, memories))

    memories, names = with_agent(agent, run)
    if as_json:
        print_json(memories)
    elif not memories:
        typer.echo("no memories")
    else:
        from carrier.cli._memory_tables import print_memories

        print_memories(memories, names)


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
    kinds = kinds_of(kind)
    embedder = make_embedder()

    async def run(store: Store, agent_id: str) -> tuple[list[ScoredMemory], dict[str, str]]:
        await load_model(embedder)
        vector = await embedder.embed_one(text)
        hits = await store.search_memories(
            agent_id=agent_id,
            embedding=vector.tolist(),
            embedding_model=embedder.model_id,
            k=k,
            room_id=room,
            kinds=kinds,
            embeddings=False,
        )
        return hits, ({} if as_json else await names_of(store, [h.memory for h in hits]))

    hits, names = with_agent(agent, run)
    if as_json:
        print_json([h.memory for h in hits])
    elif not hits:
        typer.echo("nothing found")
    else:
        from carrier.cli._memory_tables import print_memories

        print_memories([h.memory for h in hits], names, scores=[h.score for h in hits])


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

    kinds = kinds_of(kind)

    def to(out: TextIO) -> Callable[[Store, str], Awaitable[tuple[str, int]]]:
        async def run(store: Store, agent_id: str) -> tuple[str, int]:
            count = await export_memories(
                store, out, agent_id=agent_id, embeddings=embeddings, room_id=room, kinds=kinds
            )
            return agent_id, count

        return run

    if output == "-":
        agent_id, count = with_agent(agent, to(sys.stdout))
    else:
        target = Path(output)
        if target.exists() and not force:
            typer.echo(f"{target} exists; pass --force to overwrite it", err=True)
            raise typer.Exit(1)
        # Written beside the target and renamed at the end: a failed export leaves no half file.
        partial = target.with_name(target.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8") as out:
                agent_id, count = with_agent(agent, to(out))
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
    embedder = make_embedder() if embed else None
    with file.open(encoding="utf-8") as lines:

        async def run(store: Store, agent_id: str) -> ImportReport:
            return await import_memories(
                store,
                lines,
                agent_id=agent_id,
                embedder=embedder,
                before_embedding=(lambda: load_model(embedder)) if embedder is not None else None,
            )

        report = with_agent(agent, run)
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


# People, forget and prune live in their own module; registered here, in the order --help lists.
memory_app.command("people")(people_cmd)
memory_app.command("forget")(forget_cmd)
memory_app.command("prune")(prune_cmd)


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

    embedder = make_embedder()

    async def run(store: Store) -> int:
        agent_id = None
        if agent is not None:
            from carrier.lookup import resolve_agent

            agent_id = (await resolve_agent(store, agent)).id
        model = embedder.model_id
        if await store.count_stale_embeddings(embedding_model=model, agent_id=agent_id):
            await load_model(embedder)  # before the bar, which would sit at 0 while the model loads
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

    count = with_store(run)
    typer.echo(f"re-embedded {count} memor{'y' if count == 1 else 'ies'} with {embedder.model_id}")
