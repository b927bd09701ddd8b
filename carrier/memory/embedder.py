"""Embedders turn text into normalized float32 vectors.

The base class owns batching, de-duplication and the content-hash cache; implementations only
encode the texts the cache has not seen (:meth:`Embedder._encode`).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

__all__ = ["Embedder", "normalize_rows"]

DEFAULT_CACHE_SIZE = 10_000


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Float32 copy of ``vectors`` with each row scaled to unit length (all-zero rows stay zero)."""
    out = np.array(vectors, dtype=np.float32, copy=True, ndmin=2)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


class Embedder(ABC):
    """Text → normalized float32 vectors of ``dim`` dimensions.

    ``model_id`` (``name:dim``) is stored beside every vector, so vectors of different models are
    never compared. :meth:`embed` looks each text up in a bounded LRU cache keyed by the sha256 of
    the text, encodes each distinct miss once, in one batch, and returns fresh arrays the caller may
    modify. Subclasses set ``name`` and ``dim``, call ``super().__init__()`` and implement
    :meth:`_encode`.
    """

    name: str
    dim: int

    def __init__(self, *, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self.cache_size = cache_size
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()

    @property
    def model_id(self) -> str:
        return f"{self.name}:{self.dim}"

    @abstractmethod
    async def _encode(self, texts: list[str]) -> np.ndarray:
        """Encode distinct, uncached texts: shape ``(len(texts), dim)``.

        The base class normalizes the rows, so implementations need not (but may).
        """

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Shape ``(len(texts), dim)``, float32, rows L2-normalized; ``(0, dim)`` for no texts."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_one() for one text")
        keys = [hashlib.sha256(text.encode("utf-8")).digest() for text in texts]
        found: dict[bytes, np.ndarray] = {}
        misses: dict[bytes, str] = {}  # insertion-ordered: each distinct miss encoded once
        for key, text in zip(keys, texts, strict=True):
            if key in found or key in misses:
                continue
            cached = self._cache.get(key)
            if cached is None:
                misses[key] = text
            else:
                self._cache.move_to_end(key)
                found[key] = cached
        if misses:
            encoded = await self._encode(list(misses.values()))
            vectors = normalize_rows(encoded)
            expected = (len(misses), self.dim)
            if vectors.shape != expected:
                raise ValueError(
                    f"{type(self).__name__}._encode returned shape {vectors.shape}, "
                    f"expected {expected}"
                )
            for key, row in zip(misses, vectors, strict=True):
                found[key] = row
                self._remember(key, row.copy())  # a copy: a view would pin the whole batch
        out = np.empty((len(keys), self.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = found[key]
        return out

    async def embed_one(self, text: str) -> np.ndarray:
        """Shape ``(dim,)``: the normalized vector of one text."""
        return (await self.embed([text]))[0]

    def clear_cache(self) -> None:
        """Forget every cached vector."""
        self._cache.clear()

    def _remember(self, key: bytes, row: np.ndarray) -> None:
        if self.cache_size == 0:
            return
        self._cache[key] = row
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
