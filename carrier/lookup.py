"""Finding an agent from what a person types: a character file, an agent id, or a stored name.

Shared by the command-line tools (``carrier memory``, ``carrier knowledge``).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path

from carrier.character.loader import CHARACTER_SUFFIXES
from carrier.errors import ConfigError
from carrier.memory.base import Store

__all__ = ["AgentRef", "resolve_agent"]


@dataclass(frozen=True, slots=True)
class AgentRef:
    id: str
    name: str
    note: str | None = None
    """Set when the agent is not in the store (yet)."""


async def resolve_agent(store: Store, given: str, *, allow_unknown_id: bool = False) -> AgentRef:
    """The agent ``given`` names. A character file gives its agent (stored or not); otherwise an id
    or a unique name of a stored agent. ``allow_unknown_id`` accepts an id the store does not know
    yet (e.g. to add knowledge before the agent first starts). Raises ``ConfigError`` (or
    ``CharacterError`` for a bad file) saying what to give instead."""
    from carrier.character import load_character

    path = Path(given)
    if path.suffix.lower() in CHARACTER_SUFFIXES:
        if not await asyncio.to_thread(path.is_file):
            raise ConfigError(f"{given}: no such character file")
        character = await asyncio.to_thread(load_character, path)
        return AgentRef(character.agent_id, character.name)
    record = await store.get_agent(given)
    if record is not None:
        return AgentRef(record.id, record.name)
    agents = await store.list_agents()
    named = [a for a in agents if a.name.lower() == given.lower()]
    if len(named) == 1:
        return AgentRef(named[0].id, named[0].name)
    if len(named) > 1:
        ids = ", ".join(a.id for a in named)
        raise ConfigError(f"several agents are named {given!r} ({ids}); give the id instead")
    if allow_unknown_id:
        try:
            uuid.UUID(given)
        except ValueError:
            pass
        else:
            return AgentRef(given, given, note=f"agent {given} is not in the store yet")
    known = ", ".join(f"{a.name} ({a.id})" for a in agents[:10]) or "none"
    raise ConfigError(
        f"no agent with id or name {given!r} in the store: give a character file "
        f"(characters/NAME.yaml), or the id or name of one of: {known}"
    )
