"""One vector set of a VectorIndex: which memories it holds, and the state of its load and graph.

A :class:`~carrier.memory.index.manager.VectorIndex` keeps an :class:`Entry` per (agent, model,
dimension, :class:`Shard`): the set's rows once loaded, the changes queued while it loads, its
ANN graph and the rows the graph does not hold yet. The helpers here change a set's rows and
bring its graph up to date with them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from carrier.memory.index.ann import AnnIndex, USearchIndex, build_threads
from carrier.memory.index.rows import VectorRows, VectorSet

__all__ = ["BUILD_CHUNK", "Entry", "Key", "Shard", "add", "apply_rows", "describe", "replace"]

BUILD_CHUNK = 5_000
"""Rows added to an ANN index per worker-thread call: a close waits for at most one call."""


@dataclass(frozen=True)
class Shard:
    """Which of an agent's memories one vector set holds, by kind: those of ``kinds``, or every
    kind (``kinds`` None, the main set, named "")."""

    name: str
    kinds: frozenset[str] | None = None

    def holds(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds


Key = tuple[str, str, int, str]
"""(agent, model, dim, shard name)."""


@dataclass
class Entry:
    """One set's rows, its load, its ANN graph and the rows the graph does not hold yet."""

    key: Key
    vectors: VectorSet | None = None
    """None while loading."""
    queued: list[Callable[[VectorSet], np.ndarray]] = field(default_factory=list)
    """Changes that arrived while loading, applied in order once loaded."""
    loading: asyncio.Task[None] | None = None
    load_rows: int | None = None
    """How many rows the load brings (None: not counted yet)."""
    ann: AnnIndex | None = None
    """Set when ready to search."""
    building: asyncio.Task[None] | None = None
    changed: set[int] | None = None
    """Rows changed while the ANN index was built or saved, not in it yet (None: no build or save
    runs). During a save they are searched exactly beside the index."""
    pending: set[int] = field(default_factory=set)
    """Rows changed since the ANN index was last brought up to date (fewer than
    ``VectorIndex.apply_rows``), searched exactly beside it."""
    dirty: bool = False
    """The ANN index differs from its saved file."""
    saving: asyncio.Task[None] | None = None
    """A save started by :meth:`VectorIndex._maybe_save`."""
    saved_at: float = 0.0
    """When the ANN index was last saved (or became ready), monotonic."""
    ann_failed: bool = False
    """No ANN index can be built (no library, or the build failed): stay exact, do not retry."""
    cancelled: bool = False

    def apply_pending(self) -> None:
        """Bring the ANN graph up to date with the pending rows."""
        if self.pending and self.ann is not None and self.vectors is not None:
            rows = np.fromiter(self.pending, dtype=np.int64)
            self.pending.clear()
            apply_rows(self.ann, self.vectors, rows)


def describe(key: Key) -> str:
    agent_id, model, dim, shard = key
    return f"agent {agent_id}, {model} ({dim}), {shard or 'main'} set"


def replace(vs: VectorSet, *, rows: VectorRows | None, gone: set[str]) -> np.ndarray:
    """Remove the ``gone`` memories, upsert ``rows``; the rows changed."""
    freed = vs.remove(gone) if gone else np.zeros(0, dtype=np.int64)
    return freed if rows is None else np.concatenate([freed, vs.upsert(rows)])


def add(ann: AnnIndex, rows: np.ndarray, vectors: np.ndarray, *, threads: int = 0) -> None:
    """Add ``rows`` (of ``vectors``) to ``ann`` on ``threads`` threads (0: a background build's
    :func:`build_threads`)."""
    if isinstance(ann, USearchIndex):
        ann.add(rows, vectors[rows], threads=threads or build_threads())
    else:
        ann.add(rows, vectors[rows])


def apply_rows(ann: AnnIndex, vs: VectorSet, rows: np.ndarray) -> None:
    """Bring ``rows`` of the graph up to date with ``vs``: removed, then added again where live."""
    rows = np.unique(rows)
    ann.remove(rows)
    live = rows[vs.is_live(rows)]
    if live.size:
        # The event loop waits for this call: every core finishes it sooner.
        add(ann, live, vs.vectors(), threads=min(live.size, os.cpu_count() or 1))
