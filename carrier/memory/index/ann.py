"""Approximate nearest-neighbour indexes over a :class:`~carrier.memory.index.rows.VectorSet`.

An ANN index only proposes candidates: keys are the set's row numbers, and the caller re-scores
what it proposes with exact cosine from the float32 rows it holds. So the index may store
quantized vectors (int8 here: a quarter of the memory of float32) without the scores suffering;
only recall depends on it, and ``bench/recall.py`` measures that.

The default is USearch (HNSW; int8 vectors; save/load of one file; real removal of keys), chosen
over hnswlib and faiss with ``bench/recall.py --libs`` on this project's data: comparable search
latency and recall, a quarter of the memory, and removal (faiss's HNSW has none; hnswlib only
marks deleted rows and needs its capacity set up front). It is optional: without it Carrier
searches exactly, which stays correct and takes tens of milliseconds at 100k vectors per agent.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from carrier.install import install_hint

__all__ = ["INSTALL_HINT", "AnnIndex", "USearchIndex", "ann_available", "default_ann"]

logger = logging.getLogger(__name__)

INSTALL_HINT = install_hint("usearch")


def ann_available() -> bool:
    return importlib.util.find_spec("usearch") is not None


def build_threads() -> int:
    """Threads for a background build: all cores but one, so turns keep a core to run on."""
    return max(1, (os.cpu_count() or 2) - 1)


class AnnIndex(ABC):
    """Approximate top-k by cosine over unit-length float32 rows keyed by row number."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Add rows (keys not in the index); ``vectors`` is ``(len(keys), dim)`` float32."""

    @abstractmethod
    def remove(self, keys: np.ndarray) -> None:
        """Remove keys; keys not in the index are ignored."""

    @abstractmethod
    def search(self, query: np.ndarray, count: int) -> np.ndarray:
        """Keys of about the ``count`` nearest rows, nearest first."""

    @abstractmethod
    def save(self, path: Path) -> None: ...

    @property
    @abstractmethod
    def memory_bytes(self) -> int: ...


class USearchIndex(AnnIndex):
    """USearch HNSW with cosine metric.

    ``dtype`` ``"i8"`` stores a quarter of float32 and, with exact re-scoring by the caller,
    loses no recall that a wider ``expansion_search`` does not win back (measured); ``"f16"`` and
    ``"f32"`` are there for comparison.
    """

    def __init__(
        self,
        dim: int,
        *,
        dtype: str = "i8",
        connectivity: int = 16,
        expansion_add: int = 128,
        expansion_search: int = 64,
        index: Any = None,
    ) -> None:
        from usearch.index import Index

        self.dim = dim
        self._index = index or Index(
            ndim=dim,
            metric="cos",
            dtype=dtype,
            connectivity=connectivity,
            expansion_add=expansion_add,
            expansion_search=expansion_search,
        )
        self.expansion_search = expansion_search

    @classmethod
    def restore(cls, path: Path, dim: int, *, expansion_search: int = 64) -> USearchIndex | None:
        """The index saved at ``path``, or None if it is missing, unreadable or of another dim."""
        from usearch.index import Index

        try:
            index = Index.restore(str(path))
        except (OSError, RuntimeError, ValueError) as exc:
            logger.warning("cannot read the vector index %s (%s); rebuilding it", path, exc)
            return None
        if index is None or index.ndim != dim:
            return None
        return cls(dim, index=index, expansion_search=expansion_search)

    def __len__(self) -> int:
        return len(self._index)

    @property
    def expansion_search(self) -> int:
        return int(self._index.expansion_search)

    @expansion_search.setter
    def expansion_search(self, value: int) -> None:
        # Through the compiled index: usearch's typing declares the property read-only.
        self._index._compiled.expansion_search = value

    def add(self, keys: np.ndarray, vectors: np.ndarray, *, threads: int = 1) -> None:
        if len(keys):
            self._index.add(np.asarray(keys, dtype=np.uint64), vectors, threads=threads)

    def remove(self, keys: np.ndarray) -> None:
        if len(keys):
            self._index.remove(np.asarray(keys, dtype=np.uint64))

    def rename(self, keys: np.ndarray, to: np.ndarray) -> None:
        if len(keys):
            self._index.rename(np.asarray(keys, dtype=np.uint64), np.asarray(to, dtype=np.uint64))

    def search(self, query: np.ndarray, count: int) -> np.ndarray:
        count = min(count, len(self._index))
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        matches = self._index.search(query, count, threads=1)
        return np.asarray(matches.keys, dtype=np.int64)

    def save(self, path: Path) -> None:
        self._index.save(str(path))

    @property
    def memory_bytes(self) -> int:
        return int(self._index.memory_usage)


def default_ann(dim: int) -> AnnIndex | None:
    """A new, empty index of the default kind, or None when no ANN library is installed."""
    if not ann_available():
        return None
    return USearchIndex(dim)
