"""A set's ANN graph, made in the background: its saved graph reloaded and patched, or a new one.

Once a set holds ``ann_rows`` vectors, :func:`build` runs as a task: it restores the set's saved
graph where one fits (:mod:`carrier.memory.index._persist`), else builds one in a worker thread,
a chunk of rows per call, so that a close waits for one chunk at most. Searches stay exact until
it is ready; rows that change meanwhile are held in ``entry.changed`` and added after it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from carrier.memory.index._entry import BUILD_CHUNK, Entry, add, apply_rows, describe
from carrier.memory.index._persist import restore, save
from carrier.memory.index.ann import INSTALL_HINT as ANN_INSTALL_HINT
from carrier.memory.index.ann import AnnIndex
from carrier.memory.index.rows import VectorSet

__all__ = ["AnnFactory", "build"]

logger = logging.getLogger("carrier.memory.index.manager")

AnnFactory = Callable[[int], AnnIndex | None]
"""A dimension → a new, empty ANN index (None: no ANN library)."""


async def build(
    entry: Entry,
    vs: VectorSet,
    *,
    factory: AnnFactory,
    directory: Path | None,
    persist_rows: int,
    closed: Callable[[], bool],
) -> None:
    """Give ``entry`` an ANN graph of ``vs`` (its loaded set), saved where it is new or changed;
    on failure the set stays exact for good (``entry.ann_failed``)."""
    try:
        ann, added = await restore(entry, vs, directory, persist_rows=persist_rows, closed=closed)
        restored = ann is not None
        if ann is None:
            ann = factory(vs.dim)
            if ann is None:
                entry.ann_failed = True
                logger.info(
                    "no ANN library installed: vector search stays exact (%s)", ANN_INSTALL_HINT
                )
                return
            rows = vs.live_rows()
            vectors = vs.vectors()
            for start in range(0, rows.size, BUILD_CHUNK):
                if entry.cancelled or closed():
                    return
                chunk = rows[start : start + BUILD_CHUNK]
                await asyncio.to_thread(add, ann, chunk, vectors)
        if entry.cancelled:
            return
        changed = np.fromiter(entry.changed or (), dtype=np.int64)
        entry.changed = None  # from now on changes go to the index (or to a save's hold)
        if changed.size:
            apply_rows(ann, vs, changed)
        entry.ann = ann
        entry.saved_at = time.monotonic()
        entry.dirty = not restored or bool(added) or bool(changed.size)
        logger.debug(
            "ANN index ready: %s, %d rows (%s)",
            describe(entry.key),
            len(ann),
            f"reloaded, {added} added" if restored else "built",
        )
        if entry.dirty:
            await save(entry, directory, persist_rows=persist_rows)
    except Exception:
        entry.ann_failed = True
        logger.exception(
            "building the ANN index failed (%s); its searches stay exact", describe(entry.key)
        )
    finally:
        entry.changed = None
        entry.building = None
