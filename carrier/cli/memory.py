"""``carrier memory ...``: list, search, export, import an agent's memories; list the people it
knows and forget one; prune old ones.

Loaded by the main CLI only when ``carrier memory`` runs. The store is the one
the settings name (``CARRIER_MONGODB_URI``, else the SQLite file in ``CARRIER_DATA_DIR``). The agent
is given as a character file, an agent id or an agent name; a person as an entity id, a platform
id, a name or a username. Heavy imports (the embedding model) happen only in the commands that
embed (search, import, reindex), and the model loads under a sign of life: it takes seconds.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol, TextIO, TypeVar, runtime_checkable

import typer

from carrier.cli._common import err, run_or_exit

if TYPE_CHECKING:
    from carrier.audit.base import AuditLog
    from carrier.memory.base import Store
    from carrier.memory.embedder import Embedder
    from carrier.memory.people import Person
    from carrier.memory.rights import ForgetReport
    from carrier.types import Memory, MemoryKind, ScoredMemory

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

AgentOption = Annotated[
    str,
    typer.Option(
        "--agent", "-a", help="The agent: a character file, an agent id or an agent name."
    ),
]


def _with_store(action: Callable[[Store], Awaitable[T]]) -> T:
    """Open the configured store, run ``action``, close it; errors exit non-zero with a message."""
    from carrier.assemble import open_store
    from carrier.datadir import private_data_dir
    from carrier.settings import load_settings

    async def main() -> T:
        store = await open_store(private_data_dir(load_settings()))
        try:
            return await action(store)
        finally:
            await store.close()

    return run_or_exit(main())


def _with_audit(action: Callable[[Store, AuditLog], Awaitable[T]]) -> T:
    """:func:`_with_store`, with the audit log beside the store open too, and this command's
    user (``cli:<user>``) as the actor of what it records."""
    from carrier.audit.base import AuditLog
    from carrier.audit.context import acting, cli_actor
    from carrier.settings import load_settings

    async def run(store: Store) -> T:
        with acting(cli_actor()):
            async with AuditLog.from_settings(load_settings()) as audit:
                return await action(store, audit)

    return _with_store(run)


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


@runtime_checkable
class _Loadable(Protocol):
    """An embedder whose model loads on first use unless loaded first (the default one)."""

    name: str

    @property
    def loaded(self) -> bool: ...

    async def load(self) -> None: ...


async def _load(embedder: Embedder) -> None:
    """Load the embedding model now, under a sign of life: the first load imports torch and
    reads the weights (seconds, more on a busy machine), and a silent command looks hung."""
    if isinstance(embedder, _Loadable) and not embedder.loaded:
        from carrier.cli._progress import working

        with working(f"Loading the embedding model ({embedder.name})"):
            await embedder.load()


async def _names(store: Store, memories: Sequence[Memory]) -> dict[str, str]:
    """A name for each entity id of ``memories`` that has a record: its first name."""
    names = {}
    for entity_id in dict.fromkeys(m.entity_id for m in memories):
        entity = await store.get_entity(entity_id)
        if entity is not None and entity.names:
            names[entity_id] = entity.names[0]
    return names


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
    """List an agent's memories, newest first, with who each is of (name and entity id)."""
    kinds = _kinds(kind)

    async def run(store: Store, agent_id: str) -> tuple[list[Memory], dict[str, str]]:
        memories = await store.get_memories(
            agent_id=agent_id,
            room_id=room,
            entity_id=entity,
            kinds=kinds,
            limit=limit,
            embeddings=False,
        )
        return memories, ({} if as_json else await _names(store, memories))

    memories, names = _with_agent(agent, run)
    if as_json:
        _print_json(memories)
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
    kinds = _kinds(kind)
    embedder = _embedder()

    async def run(store: Store, agent_id: str) -> tuple[list[ScoredMemory], dict[str, str]]:
        await _load(embedder)
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
        return hits, ({} if as_json else await _names(store, [h.memory for h in hits]))

    hits, names = _with_agent(agent, run)
    if as_json:
        _print_json([h.memory for h in hits])
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
            return await import_memories(
                store,
                lines,
                agent_id=agent_id,
                embedder=embedder,
                before_embedding=(lambda: _load(embedder)) if embedder is not None else None,
            )

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


PlatformOption = Annotated[
    str | None,
    typer.Option(
        "--platform",
        help="Only people seen on this platform (discord, instagram, api, cli); default: all.",
    ),
]


@memory_app.command("people")
def people_cmd(
    agent: AgentOption,
    who: Annotated[
        str | None,
        typer.Argument(
            metavar="WHO",
            help="Only the people this names, as `forget` finds them: an entity id, a platform "
            "id, a name or a username.",
        ),
    ] = None,
    platform: PlatformOption = None,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many, by name.")] = 200,
    as_json: JsonOption = False,
) -> None:
    """List the people an agent knows: entity id, names, platform id, messages and memories.

    Find someone here before `carrier memory forget`.
    """
    from dataclasses import asdict

    from carrier.memory.people import find_people, list_people

    async def run(store: Store, agent_id: str) -> list[Person]:
        if who is not None:
            return await find_people(store, agent_id=agent_id, who=who, platform=platform)
        return await list_people(store, agent_id=agent_id, platform=platform)

    people = _with_agent(agent, run)
    if as_json:
        for person in people[:limit]:
            typer.echo(json.dumps(asdict(person)))
    elif not people:
        typer.echo(f"nobody matches {who!r}" if who is not None else "nobody yet")
    else:
        from carrier.cli._memory_tables import print_people

        print_people(people[:limit])
    if len(people) > limit:
        err(f"... and {len(people) - limit} more: pass WHO or --platform, or raise --limit")


@memory_app.command("forget")
def forget_cmd(
    who: Annotated[
        str,
        typer.Argument(
            metavar="WHO",
            help="The person: an entity id, a platform id, a name or a username "
            "(see `carrier memory people`).",
        ),
    ],
    agent: AgentOption,
    platform: PlatformOption = None,
    keep_replies: Annotated[
        bool, typer.Option("--keep-replies", help="Keep the agent's replies to them.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Forget a person, in every room of the agent.

    WHO is matched against entity ids, platform ids (e.g. a Discord user id), names and
    usernames (ignoring case), on every platform unless --platform is given. When several
    people match, they are listed and you choose one (with --yes: nothing is deleted, exit 1).
    No match: exit 1.

    Deletes the messages they sent, the facts about them and the agent's replies to them.

    Summaries that retell them and their entity record (names, memberships) go too.
    """
    from carrier.cli._person import choose
    from carrier.lookup import resolve_agent
    from carrier.memory.people import find_people
    from carrier.memory.rights import forget_entity

    async def run(store: Store, audit: AuditLog) -> tuple[Person, ForgetReport]:
        ref = await resolve_agent(store, agent)
        found = await find_people(store, agent_id=ref.id, who=who, platform=platform)
        person = choose(found, who=who, agent=agent, yes=yes)
        if not yes:
            typer.confirm(
                f"Delete everything agent {ref.name} remembers of {person.describe()}? "
                "This cannot be undone",
                abort=True,
            )
        return person, await forget_entity(
            store,
            agent_id=ref.id,
            entity_id=person.entity_id,
            include_replies=not keep_replies,
            audit=audit,
        )

    person, report = _with_audit(run)
    typer.echo(
        f"forgot {person.label}: {report.total} memories "
        f"({report.messages} messages, {report.facts} facts, {report.replies} replies, "
        f"{report.summaries} summaries, {report.other} other) in {len(report.rooms)} room(s)"
        + ("; their entity record (names, platform id) too" if report.entity else "")
    )


@memory_app.command("prune")
def prune_cmd(
    agent: AgentOption,
    older_than: Annotated[
        str,
        typer.Option("--older-than", help="Delete what is older than this age: 30d, 12h, 2w, 90m."),
    ],
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", help="Only memories of this kind (repeatable; default: message)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")
    ] = False,
) -> None:
    """Delete an agent's memories older than an age (messages unless --kind says otherwise).

    Nothing is summarized first (the daily retention job does that when the character's
    settings.retention asks). Knowledge is managed with `carrier knowledge`, not here.

    The run is recorded in the audit log (memory.prune); a dry run changes nothing and is not.
    """
    from datetime import UTC, datetime

    from carrier.cli._when import parse_age
    from carrier.types import MemoryKind

    age = parse_age(older_than, option="--older-than")
    kinds = _kinds(kind) or [MemoryKind.MESSAGE]
    if MemoryKind.KNOWLEDGE in kinds:
        raise typer.BadParameter(
            "knowledge is not pruned by age; remove documents with `carrier knowledge remove`",
            param_hint="--kind",
        )
    before = datetime.now(UTC) - age

    async def run(store: Store, audit: AuditLog) -> tuple[str, int]:
        from carrier.audit.context import current_actor
        from carrier.audit.model import AuditKind
        from carrier.lookup import resolve_agent
        from carrier.retention.prune import prune_memories

        ref = await resolve_agent(store, agent)
        count = await prune_memories(
            store, agent_id=ref.id, kinds=kinds, before=before, dry_run=dry_run
        )
        if not dry_run:
            await audit.record(
                AuditKind.MEMORY_PRUNE,
                actor=current_actor(),
                agent_id=ref.id,
                action="prune",
                detail={
                    "older_than": older_than,
                    "before": before.isoformat(),
                    "kinds": [str(k) for k in kinds],
                    "deleted": count,
                },
            )
        return ref.name, count

    name, count = _with_audit(run)
    what = "/".join(str(k) for k in kinds)
    if dry_run:
        typer.echo(f"would delete {count} {what} memories of {name} older than {older_than}")
    else:
        typer.echo(f"deleted {count} {what} memories of {name} older than {older_than}")


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
        model = embedder.model_id
        if await store.count_stale_embeddings(embedding_model=model, agent_id=agent_id):
            await _load(embedder)  # before the bar, which would sit at 0 while the model loads
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
