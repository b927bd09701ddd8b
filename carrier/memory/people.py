"""The people an agent knows, and finding one by what a human remembers of them.

Forgetting a person (:func:`carrier.memory.rights.forget_entity`) needs their entity id, a UUID
nobody remembers. A human remembers a name, a username or a platform id (a Discord user id), so
:func:`find_people` takes any of those, on every platform unless one is named, and returns every
person that fits: the caller shows them and lets the human choose. :func:`list_people` lists them
all, with how many memories each left.

A person here is an entity record (the names and platform id a client saw them with), or, when
there is none (it was deleted, or the memories were imported), an entity id under which the agent
still keeps memories.
"""

from __future__ import annotations

from dataclasses import dataclass

from carrier.memory._entities import name_key
from carrier.memory.base import Store
from carrier.memory.rights import entity_id_for
from carrier.types import Entity, MemoryKind

__all__ = ["Person", "find_people", "list_people"]


@dataclass(frozen=True)
class Person:
    """Someone an agent knows, as a human picks them out of a list."""

    entity_id: str
    names: list[str]
    """Every display name and username they were seen with, first seen first."""
    platform: str | None
    """Where they were seen; None when there is no entity record (only memories)."""
    platform_id: str | None
    """Their id on that platform (a Discord user id, an Instagram user id, ...)."""
    messages: int
    """Messages they wrote."""
    memories: int
    """Every memory under their entity id: their messages, facts and notes about them."""

    @property
    def name(self) -> str:
        """What to call them: their first name, else their platform id, else their entity id."""
        return self.names[0] if self.names else self.platform_id or self.entity_id

    @property
    def label(self) -> str:
        """Their name and entity id (``Ana (4f3c...)``); the entity id alone if that is all."""
        return self.entity_id if self.name == self.entity_id else f"{self.name} ({self.entity_id})"

    @property
    def where(self) -> str:
        """``discord 1234`` (their platform and id there), or ``-`` when there is no record."""
        return f"{self.platform} {self.platform_id}" if self.platform else "-"

    def describe(self) -> str:
        """One line that names them unmistakably: names, platform id and entity id."""
        names = " / ".join(self.names) or "(no name)"
        return f"{names} ({self.where}, entity {self.entity_id})"


async def _person(store: Store, agent_id: str, entity_id: str, entity: Entity | None) -> Person:
    memories = await store.count_memories(agent_id=agent_id, entity_id=entity_id)
    messages = (
        await store.count_memories(
            agent_id=agent_id, entity_id=entity_id, kinds=[MemoryKind.MESSAGE]
        )
        if memories
        else 0
    )
    return Person(
        entity_id=entity_id,
        names=list(entity.names) if entity is not None else [],
        platform=entity.platform if entity is not None else None,
        platform_id=entity.platform_id if entity is not None else None,
        messages=messages,
        memories=memories,
    )


async def find_people(
    store: Store, *, agent_id: str, who: str, platform: str | None = None
) -> list[Person]:
    """The people of ``agent_id`` that ``who`` names: an entity id, a platform id, a display name
    or a username (names ignore case; a leading ``@`` is optional), on ``platform`` only if given.

    An entity id of the agent is unambiguous and picks that person alone. Otherwise everyone who
    fits is returned (the same platform id on two platforms, two people called Alice), those
    found by platform id first, then by name. An entity id, or with ``platform`` a platform id,
    that has no record but still has memories is a person too. Empty when nobody fits.
    """
    who = who.strip()
    if not who:
        return []
    entity = await store.get_entity(who)
    if entity is not None and entity.agent_id == agent_id and platform in (None, entity.platform):
        return [await _person(store, agent_id, entity.id, entity)]
    found: dict[str, Entity | None] = {}
    for match in await store.find_entities(agent_id=agent_id, platform=platform, platform_id=who):
        found.setdefault(match.id, match)
    names = dict.fromkeys(name_key(n) for n in (who, who.removeprefix("@")) if n.strip("@"))
    for name in names:
        for match in await store.find_entities(agent_id=agent_id, platform=platform, name=name):
            found.setdefault(match.id, match)
    # No record, but memories: a record deleted by hand, or memories imported without one.
    # (``who`` itself only if no record has that id: one of another platform, or agent, is not.)
    bare = [] if entity is not None else [who]
    if platform is not None:
        bare.append(entity_id_for(agent_id, platform, who))
    for entity_id in bare:
        if entity_id not in found and await store.count_memories(
            agent_id=agent_id, entity_id=entity_id
        ):
            found[entity_id] = None
    return [await _person(store, agent_id, entity_id, e) for entity_id, e in found.items()]


async def list_people(store: Store, *, agent_id: str, platform: str | None = None) -> list[Person]:
    """Every person of ``agent_id`` with an entity record (on ``platform`` only, if given), by
    name, with how many memories each left."""
    entities = await store.find_entities(agent_id=agent_id, platform=platform)
    entities.sort(key=lambda e: (name_key(e.names[0]) if e.names else "\uffff", e.id))
    return [await _person(store, agent_id, e.id, e) for e in entities]
