"""What the vector index takes: the filter of a search, and the batch of rows a store reads.

Kept apart from :mod:`carrier.memory.index.rows` (which re-exports them) so that the set itself
stays one idea.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["VectorFilter", "VectorRows"]


@dataclass(frozen=True, slots=True)
class VectorFilter:
    """What a search is restricted to; ``None`` means any. Times are microseconds since the epoch:
    ``since`` inclusive, ``before`` exclusive. An empty ``kinds`` matches nothing."""

    room_id: str | None = None
    entity_id: str | None = None
    kinds: frozenset[str] | None = None
    since_us: int | None = None
    before_us: int | None = None
    exclude_ids: frozenset[str] = frozenset()

    @property
    def narrows(self) -> bool:
        """Whether the filter excludes anything (beyond agent and model)."""
        return (
            self.room_id is not None
            or self.entity_id is not None
            or self.kinds is not None
            or self.since_us is not None
            or self.before_us is not None
            or bool(self.exclude_ids)
        )


@dataclass(slots=True)
class VectorRows:
    """A batch of memories' vectors with their filter fields, as a store reads them."""

    ids: list[str]
    rooms: list[str]
    entities: list[str]
    kinds: list[str]
    created_us: list[int]
    vectors: np.ndarray
    """``(len(ids), dim)`` float32, not necessarily normalized."""

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: list[int]) -> VectorRows:
        """The rows at these positions."""
        return VectorRows(
            ids=[self.ids[i] for i in index],
            rooms=[self.rooms[i] for i in index],
            entities=[self.entities[i] for i in index],
            kinds=[self.kinds[i] for i in index],
            created_us=[self.created_us[i] for i in index],
            vectors=np.asarray(self.vectors)[index],
        )
