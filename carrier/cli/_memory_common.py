"""What the ``carrier memory`` commands share: opening the store (and the audit log), finding
the agent, options, loading the embedding model under a sign of life, printing memories."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Protocol, TypeVar, runtime_checkable

import typer

from carrier.cli._common import quiet_ml, run_or_exit

if TYPE_CHECKING:
    from carrier.audit.base import AuditLog
    from carrier.memory.base import Store
    from carrier.memory.embedder import Embedder
    from carrier.types import Memory, MemoryKind

T = TypeVar("T")

AgentOption = Annotated[
    str,
    typer.Option(
        "--agent", "-a", help="The agent: a character file, an agent id or an agent name."
    ),
]


def with_store(action: Callable[[Store], Awaitable[T]]) -> T:
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


def with_audit(action: Callable[[Store, AuditLog], Awaitable[T]]) -> T:
    """:func:`with_store`, with the audit log beside the store open too, and this command's
    user (``cli:<user>``) as the actor of what it records."""
    from carrier.audit.base import AuditLog
    from carrier.audit.context import acting, cli_actor
    from carrier.settings import load_settings

    async def run(store: Store) -> T:
        with acting(cli_actor()):
            async with AuditLog.from_settings(load_settings()) as audit:
                return await action(store, audit)

    return with_store(run)


def with_agent(agent: str, action: Callable[[Store, str], Awaitable[T]]) -> T:
    """:func:`with_store`, with the agent resolved to its id: a character file's agent, else an
    agent id or name known to the store."""
    from carrier.lookup import resolve_agent

    async def run(store: Store) -> T:
        return await action(store, (await resolve_agent(store, agent)).id)

    return with_store(run)


def kinds_of(values: list[str] | None) -> list[MemoryKind] | None:
    from carrier.types import MemoryKind

    if not values:
        return None
    try:
        return [MemoryKind(v.lower()) for v in values]
    except ValueError:
        choices = ", ".join(k.value for k in MemoryKind)
        raise typer.BadParameter(f"use one of {choices}", param_hint="--kind") from None


def make_embedder() -> Embedder:
    """The default embedder, offline (its model loads at the first embedding, or :func:`load_model`)."""
    from carrier.assemble import default_embedder

    quiet_ml()

    return default_embedder()


@runtime_checkable
class _Loadable(Protocol):
    """An embedder whose model loads on first use unless loaded first (the default one)."""

    name: str

    @property
    def loaded(self) -> bool: ...

    async def load(self) -> None: ...


async def load_model(embedder: Embedder) -> None:
    """Load the embedding model now, under a sign of life: the first load imports torch and
    reads the weights (seconds, more on a busy machine), and a silent command looks hung."""
    if isinstance(embedder, _Loadable) and not embedder.loaded:
        from carrier.cli._progress import working

        with working(f"Loading the embedding model ({embedder.name})"):
            await embedder.load()


async def names_of(store: Store, memories: Sequence[Memory]) -> dict[str, str]:
    """A name for each entity id of ``memories`` that has a record: its first name."""
    names = {}
    for entity_id in dict.fromkeys(m.entity_id for m in memories):
        entity = await store.get_entity(entity_id)
        if entity is not None and entity.names:
            names[entity_id] = entity.names[0]
    return names


def print_json(memories: list[Memory]) -> None:
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


PlatformOption = Annotated[
    str | None,
    typer.Option(
        "--platform",
        help="Only people seen on this platform (discord, instagram, api, cli); default: all.",
    ),
]
