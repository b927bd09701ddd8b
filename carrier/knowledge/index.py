"""The document index: which documents an agent knows, kept in the Store's settings.

One settings key per agent, ``knowledge:<agent_id>``, holds every document's source id, content
hash, chunk count and how it was chunked and embedded. Chunk ids are derived, not stored:
``stable_id(agent_id, "knowledge", source, hash, str(i))`` for ``i < chunks``, so the index stays
small (about 300 bytes a document) and a chunk written twice is recorded once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from carrier.errors import StoreError
from carrier.knowledge.sources import Origin
from carrier.memory.base import Store
from carrier.types import stable_id, utcnow

__all__ = [
    "INDEX_VERSION",
    "KnowledgeDocument",
    "chunk_id",
    "chunk_ids",
    "index_key",
    "knowledge_room_id",
    "load_index",
    "save_index",
]

INDEX_VERSION = 1


class KnowledgeDocument(BaseModel):
    """A document an agent knows, as recorded in its index."""

    model_config = ConfigDict(frozen=True)

    source: str
    """Path relative to the character file, absolute path (added by ``carrier knowledge add``),
    or ``inline:<sha256 prefix>`` for a knowledge string."""
    title: str
    hash: str
    """sha256 of the document's bytes (of the UTF-8 text, for a knowledge string)."""
    chunks: int
    words: int = 0
    origin: Origin = "character"
    shared: bool = False
    chunking: str = ""
    """:attr:`Chunking.signature` the chunks were cut with."""
    embedding_model: str = ""
    """``name:dim`` of the model that embedded the chunks."""
    updated_at: datetime = Field(default_factory=utcnow)

    def chunk_ids(self, agent_id: str) -> list[str]:
        return chunk_ids(agent_id, self.source, self.hash, self.chunks)


def index_key(agent_id: str) -> str:
    return f"knowledge:{agent_id}"


def knowledge_room_id(agent_id: str) -> str:
    """The room every knowledge chunk of the agent is stored in."""
    return stable_id(agent_id, "knowledge")


def chunk_id(agent_id: str, source: str, doc_hash: str, index: int) -> str:
    return stable_id(agent_id, "knowledge", source, doc_hash, str(index))


def chunk_ids(agent_id: str, source: str, doc_hash: str, count: int) -> list[str]:
    return [chunk_id(agent_id, source, doc_hash, i) for i in range(count)]


async def load_index(store: Store, agent_id: str) -> dict[str, KnowledgeDocument]:
    """The agent's documents by source id; empty when it has none."""
    key = index_key(agent_id)
    value: Any = await store.get_setting(key)
    if value is None:
        return {}
    if not isinstance(value, dict) or value.get("version") != INDEX_VERSION:
        version = value.get("version") if isinstance(value, dict) else None
        raise StoreError(
            f"the knowledge index in setting {key!r} has version {version!r}; this Carrier reads "
            f"version {INDEX_VERSION} (a newer Carrier wrote it: upgrade Carrier)"
        )
    documents = value.get("documents") or {}
    return {
        source: KnowledgeDocument.model_validate({**entry, "source": source})
        for source, entry in documents.items()
    }


async def save_index(store: Store, agent_id: str, index: dict[str, KnowledgeDocument]) -> None:
    documents = {
        source: doc.model_dump(mode="json", exclude={"source"})
        for source, doc in sorted(index.items())
    }
    await store.set_setting(index_key(agent_id), {"version": INDEX_VERSION, "documents": documents})
