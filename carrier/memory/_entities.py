"""What :meth:`~carrier.memory.base.Store.find_entities` means, written once for every store.

The exact filters (agent, platform, platform id) are indexed fields the database matches itself.
A name is matched here, in Python, so that both stores ignore case the same Unicode way (SQLite's
``lower()`` and MongoDB's case-insensitive regexes each fold case differently, or only for ASCII):
``ALICE``, ``alice`` and ``Alice`` are one name, and so are ``STRASSE`` and ``straße``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from carrier.types import Entity

__all__ = ["entity_filters", "name_key", "named"]


def entity_filters(agent_id: str, platform: str | None, platform_id: str | None) -> dict[str, str]:
    """The exact-match filters, by field: the same names as SQLite columns and MongoDB fields."""
    fields = {"agent_id": agent_id}
    if platform is not None:
        fields["platform"] = platform
    if platform_id is not None:
        fields["platform_id"] = platform_id
    return fields


def name_key(name: str) -> str:
    """A name as compared: Unicode-normalized (NFKC), case folded, outer spaces dropped."""
    return unicodedata.normalize("NFKC", name).casefold().strip()


def named(entities: Iterable[Entity], name: str | None) -> list[Entity]:
    """The entities that have ``name`` among their names (ignoring case); all when it is None."""
    if name is None:
        return list(entities)
    wanted = name_key(name)
    return [e for e in entities if any(name_key(n) == wanted for n in e.names)]
