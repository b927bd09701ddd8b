"""Search planning over one loaded vector set: ANN candidates re-scored exactly, or an exact scan.

A set with an ANN graph asks it for candidates, over-fetching by the inverse of the filter's
selectivity (which the set's filter arrays give exactly), adds the rows the graph does not hold
yet, filters them and re-scores them exactly. A filter that keeps fewer than ``ann_rows`` rows is
answered exactly over just those rows instead, as is a set without a graph. Every returned score
is the exact cosine, re-computed from the float32 rows.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Sequence

import numpy as np

from carrier.memory.index._entry import Entry
from carrier.memory.index.ann import AnnIndex, USearchIndex
from carrier.memory.index.rows import VectorFilter, VectorSet, among

__all__ = ["BREADTH", "ann_top_k", "hits", "search_set"]

_THREAD_ROWS = 50_000
"""Exact searches over more rows than this run in a worker thread, off the event loop."""

BREADTH: tuple[tuple[int, int, int], ...] = (
    (300_000, 40, 64),
    (sys.maxsize, 64, 96),
)
"""``(rows, candidates, ef)``: a set of fewer than ``rows`` live vectors fetches at least
``candidates`` ANN candidates (re-scored exactly; more when a filter drops some) with HNSW
expansion ``ef``. A larger graph needs a wider search to keep its recall. Chosen with
``bench/recall.py --sweep`` on real MiniLM vectors: at 100k, 40/64 gave recall@10 0.982 in 0.67 ms
(64/96: 0.990 in 0.95 ms); at 1M, 64/96 gave 0.967 in 1.4 ms (then partly synthetic vectors; on
a million real ones: 0.972 in 1.2 ms)."""


async def search_set(
    entry: Entry,
    vs: VectorSet,
    q: np.ndarray,
    k: int,
    flt: VectorFilter,
    *,
    ann_rows: int,
    breadth: Sequence[tuple[int, int, int]],
    max_candidates: int,
) -> list[tuple[str, float]]:
    """Ids and exact cosine scores of the top ``k`` rows of ``vs`` (the entry's loaded set, not
    empty) for the unit query ``q``, best first."""
    if entry.ann is not None:
        held = entry.pending | entry.changed if entry.changed else entry.pending
        found = ann_top_k(
            entry.ann,
            vs,
            q,
            k,
            flt,
            held,
            ann_rows=ann_rows,
            breadth=breadth,
            max_candidates=max_candidates,
        )
        if found is not None:
            return hits(vs, *found)
    rows = vs.rows_matching(flt)
    if (vs.size if rows is None else rows.size) > _THREAD_ROWS:
        exact = await asyncio.to_thread(vs.top_k, q, k, rows=rows)
    else:
        exact = vs.top_k(q, k, rows=rows)
    return hits(vs, *exact)


def hits(vs: VectorSet, rows: np.ndarray, scores: np.ndarray) -> list[tuple[str, float]]:
    """The memory ids of ``rows``, with their scores (a row removed while a thread searched is
    left out)."""
    return [
        (memory_id, score)
        for memory_id, score in zip(vs.ids_of(rows.tolist()), scores.tolist(), strict=True)
        if memory_id is not None
    ]


def ann_top_k(
    ann: AnnIndex,
    vs: VectorSet,
    q: np.ndarray,
    k: int,
    flt: VectorFilter,
    held: set[int] | None = None,
    *,
    ann_rows: int,
    breadth: Sequence[tuple[int, int, int]],
    max_candidates: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """ANN candidates (and the ``held`` rows, not in the index yet), filtered and re-scored
    exactly; None when exact search is better."""
    live = len(vs)
    extra = np.fromiter(held, dtype=np.int64) if held else None
    matching = vs.estimate(flt)
    if matching == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if matching < ann_rows:
        return None  # few rows match: scoring just those is exact and cheap
    candidates, ef_search = next((c, e) for rows, c, e in breadth if live < rows)
    want = max(k, candidates)
    count = math.ceil(want * live / matching * (1.5 if flt.narrows else 1.0))
    while count <= max_candidates:
        if isinstance(ann, USearchIndex):
            ann.expansion_search = max(ef_search, count)
        rows = ann.search(q, count)
        rows = rows[(rows >= 0) & (rows < vs.size)]
        if extra is not None:
            # The held rows the graph did not return (np.union1d sorts both: ~4x the cost).
            extra = extra[extra < vs.size]
            rows = np.concatenate([rows, extra[~among(extra, rows)]])
        rows = rows[vs.matches(rows, flt)] if flt.narrows else rows[vs.is_live(rows)]
        if rows.size >= k or count >= live:
            scores = vs.scores(q, rows)
            order = np.lexsort((rows, -scores))[:k]
            return rows[order], scores[order]
        count *= 4
    return None
