"""Memory: the Store (agents, rooms, entities, memories, settings), embedders and vector search.

Importing this package never imports torch or sentence-transformers: the real embedder,
:class:`~carrier.memory.sentence.SentenceTransformerEmbedder`, loads on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from carrier.memory.base import Store
from carrier.memory.embedder import Embedder
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore

if TYPE_CHECKING:
    from carrier.memory.sentence import SentenceTransformerEmbedder

__all__ = ["Embedder", "HashEmbedder", "SQLiteStore", "SentenceTransformerEmbedder", "Store"]


def __getattr__(name: str) -> Any:
    if name == "SentenceTransformerEmbedder":
        from carrier.memory.sentence import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
