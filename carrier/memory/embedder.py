"""Embedders turn text into normalized float32 vectors.

The base class owns batching and the content-hash cache; implementations only encode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

__all__ = ["Embedder"]


class Embedder(ABC):
    """Text → normalized float32 vectors of ``dim`` dimensions.

    ``model_id`` (``name:dim``) is stored beside every vector, so vectors of different models are
    never compared.
    """

    name: str
    dim: int

    @property
    def model_id(self) -> str:
        return f"{self.name}:{self.dim}"

    @abstractmethod
    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Shape ``(len(texts), dim)``, float32, each row L2-normalized."""

    async def embed_one(self, text: str) -> np.ndarray:
        return (await self.embed([text]))[0]
