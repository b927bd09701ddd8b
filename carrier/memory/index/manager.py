"""VectorIndex: the in-process vector search a store delegates to, sets per agent and model.

Each (agent, embedding model, dimension) gets a :class:`~carrier.memory.index.rows.VectorSet`
per :class:`Shard`: the main set holds every kind; knowledge (by default) also has a set of its
own. A search for knowledge alone reads the knowledge set, however long the conversations grow
(10% knowledge at 100k: 0.9 ms, where the main set's kind filter cost 8.9 ms); every other search
reads the main set (one search, none to merge: an unfiltered one stays as fast as before). Each
set is loaded once from the store in the background on first use, then kept in step with writes
by the store (``upsert`` / ``remove`` / ``remove_matching`` / ``drop_agent``). Until a set is
loaded the store answers searches its old way (reading candidates from the database) where that
reads few rows (one room, one person, facts); a search that would read about every vector waits
for the load instead (the load reads the same rows once), as does any search of a set small
enough to load in a blink (``wait_rows``).

Once a set holds ``ann_rows`` vectors an ANN index (:mod:`carrier.memory.index.ann`) is built in a
worker thread; searches stay exact until it is ready, and rows that change during the build are
re-added after it. Once it is ready, changed rows reach it in batches (``apply_rows``), the way
vector databases grow a segment before indexing it: meanwhile they are searched exactly beside
it. An index of ``persist_rows`` or more is saved beside the database: the graph and a manifest
of the memory each of its rows held (id and a fingerprint of the vector). The next start reloads
it and patches it to the rows as loaded, whatever their order: rows whose memory still has the
same vector are renamed to that memory's new row, the others removed, and memories it lacks
(written by another process, or after the last save of one that crashed) added; when fewer than
half of the rows survive it is rebuilt instead. A changed index is saved on close and,
while it runs, at most every ``save_every_s`` (15 minutes). Saving happens in a worker thread
too; the graph is not changed meanwhile (an ANN graph is not safe to change while it is read):
rows that change are searched exactly beside it and added once the file is written. Each save
goes to files of its own, the manifest last: processes that share the directory never read
another's half-written one.

Filters: sets per agent make the agent filter free. The other filters (room, entity, kinds,
time, excluded ids) are applied to ANN candidates after the fact, over-fetching by the inverse of
the filter's selectivity (which the set's filter arrays give exactly); a filter that keeps too few
rows for that to pay is answered exactly over just the rows it keeps. Every returned score is the
exact cosine, re-computed from the float32 rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import re
import shutil
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from carrier.memory.index.ann import INSTALL_HINT as ANN_INSTALL_HINT
from carrier.memory.index.ann import AnnIndex, USearchIndex, build_threads, default_ann
from carrier.memory.index.rows import VectorFilter, VectorRows, VectorSet

__all__ = ["BREADTH", "Loader", "Shard", "VectorIndex"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shard:
    """Which of an agent's memories one vector set holds, by kind: those of ``kinds``, or every
    kind (``kinds`` None, the main set, named "")."""

    name: str
    kinds: frozenset[str] | None = None

    def holds(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds


Loader = Callable[[str, str, int, Shard], AsyncIterator[VectorRows]]
"""``(agent_id, embedding_model, dim, shard)`` → pages of that agent's vectors of that model and
dimension, of the kinds the shard holds, in insertion order."""
Counter = Callable[[str, str, int, Shard], Awaitable[int]]
"""The same arguments → about how many vectors :data:`Loader` would yield."""
AnnFactory = Callable[[int], AnnIndex | None]

_Key = tuple[str, str, int, str]
"""(agent, model, dim, shard name)."""
_BUILD_CHUNK = 5_000
"""Rows added to an ANN index per worker-thread call: a close waits for at most one call."""
_THREAD_ROWS = 50_000
"""Exact searches over more rows than this run in a worker thread, off the event loop."""
_FORMAT = 3
_MANIFEST = ".rows.npz"
_RENAME_OFFSET = 1 << 40
"""Renamed keys pass through ``key + offset`` (above any row) so no two ever collide."""
_MIN_KEPT = 0.5
"""A saved index is patched when at least this share of the set's rows keep their place in it."""

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


@dataclass
class _Entry:
    key: _Key
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


class VectorIndex:
    """Per-agent, per-model vector sets with exact and ANN search; see the module docstring.

    ``directory`` (None: never persist) is where ANN indexes are saved. ``own_sets``: the kinds
    that also get a set of their own, read by searches for that kind alone (the main set holds
    every kind). Use from one event loop.
    """

    def __init__(
        self,
        *,
        load: Loader,
        count: Counter,
        directory: Path | None = None,
        ann_rows: int = 20_000,
        persist_rows: int = 20_000,
        wait_rows: int = 20_000,
        ann_factory: AnnFactory = default_ann,
        max_candidates: int = 4096,
        breadth: Sequence[tuple[int, int, int]] = BREADTH,
        save_every_s: float = 900.0,
        own_sets: Sequence[str] = ("knowledge",),
        apply_rows: int = 32,
    ) -> None:
        self._load = load
        self._count = count
        self.directory = directory
        self.ann_rows = ann_rows
        self.persist_rows = persist_rows
        self.wait_rows = wait_rows
        self._ann_factory = ann_factory
        self.max_candidates = max_candidates
        self.breadth = tuple(breadth)
        """How widely an ANN search looks, by set size; see :data:`BREADTH`."""
        self.apply_rows = apply_rows
        """Changed rows reach the ANN graph in batches of this many, added on every core; until
        then they are searched exactly beside it (a few dozen rows: microseconds). At 100k rows a
        batch of 32 costs 0.24 ms a row, one row at a time 0.48 ms; most turns add none."""
        self.save_every_s = save_every_s
        """A changed index is saved again at most this often while it runs (besides on close),
        so that a start after a crash reloads it and adds only the rows written since."""
        self.shards: tuple[Shard, ...] = (
            Shard(""),
            *(Shard(kind, kinds=frozenset({kind})) for kind in sorted(set(own_sets))),
        )
        self._shard_named = {shard.name: shard for shard in self.shards}
        self._entries: dict[_Key, _Entry] = {}
        self._closed = False

    # -- state -----------------------------------------------------------------------------
    def shard_for(self, kinds: frozenset[str] | None) -> Shard:
        """The set a search for these kinds reads: a kind's own set, else the main one."""
        if kinds:
            for shard in self.shards[1:]:
                if shard.kinds is not None and kinds <= shard.kinds:
                    return shard
        return self.shards[0]

    def loaded(self, agent_id: str, model: str, dim: int, shard: str = "") -> bool:
        """Whether a set (the main one by default) is loaded."""
        entry = self._entries.get((agent_id, model, dim, shard))
        return entry is not None and entry.vectors is not None

    def ann_ready(self, agent_id: str, model: str, dim: int, shard: str = "") -> bool:
        """Whether a set (the main one by default) searches through its ANN index."""
        entry = self._entries.get((agent_id, model, dim, shard))
        return entry is not None and entry.ann is not None

    def has_agent(self, agent_id: str) -> bool:
        return any(key[0] == agent_id for key in self._entries)

    def holds(self, agent_id: str, memory_id: str) -> bool:
        """Whether the agent's sets have this memory's vector: every set of its model meant to
        hold its kind does (a set still loading holds nothing)."""
        sets = [(key, entry.vectors) for key, entry in self._entries.items() if key[0] == agent_id]
        found = next(((key, vs) for key, vs in sets if vs is not None and memory_id in vs), None)
        if found is None:
            return False
        (_, model, dim, _), vs = found
        kind = vs.kind_of(memory_id)
        assert kind is not None  # the set holds the memory
        return all(
            other is not None and memory_id in other
            for key, other in sets
            if key[1:3] == (model, dim) and self._shard_named[key[3]].holds(kind)
        )

    @property
    def agents(self) -> set[str]:
        return {key[0] for key in self._entries}

    def stats(self) -> list[dict[str, object]]:
        """Per set: agent, model, dim, set ("main" or the kind it holds), rows, bytes, whether
        its ANN index is ready."""
        out: list[dict[str, object]] = []
        for (agent_id, model, dim, shard), entry in self._entries.items():
            vs = entry.vectors
            out.append(
                {
                    "agent_id": agent_id,
                    "model": model,
                    "dim": dim,
                    "set": shard or "main",
                    "rows": len(vs) if vs is not None else None,
                    "bytes": vs.nbytes if vs is not None else 0,
                    "ann": entry.ann is not None,
                    "ann_bytes": entry.ann.memory_bytes if entry.ann is not None else 0,
                }
            )
        return out

    # -- loading -----------------------------------------------------------------------------
    async def prepare(
        self, agent_id: str, model: str, dim: int, *, wait: bool = True, ann: bool = True
    ) -> None:
        """Start loading the agent's sets of this model (if not yet); with ``wait``, return when
        they are loaded and (with ``ann``, where big enough for one) their ANN indexes ready."""
        entries = [self._entry((agent_id, model, dim, s.name)) for s in self.shards]
        if not wait:
            return
        for entry in entries:
            loading = entry.loading
            if loading is not None:
                await asyncio.shield(loading)
        for entry in entries:
            building = entry.building
            if ann and building is not None:
                await asyncio.shield(building)

    def _entry(self, key: _Key) -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(key)
            entry.loading = asyncio.get_running_loop().create_task(
                self._load_entry(entry), name=f"carrier-vectors-load-{_describe(key)}"
            )
        return entry

    async def _load_entry(self, entry: _Entry) -> None:
        agent_id, model, dim, shard = entry.key
        try:
            vs = VectorSet(dim)
            async for page in self._load(agent_id, model, dim, self._shard_named[shard]):
                if entry.cancelled:
                    return
                vs.upsert(page)
                await asyncio.sleep(0)  # let turns run between pages
            for change in entry.queued:
                change(vs)
            entry.queued.clear()
            entry.vectors = vs
            logger.debug("loaded %d vectors: %s", len(vs), _describe(entry.key))
        except Exception:
            logger.exception("loading vectors failed: %s", _describe(entry.key))
            self._entries.pop(entry.key, None)  # the next search tries again
            return
        finally:
            entry.loading = None
        self._maybe_build(entry)

    # -- search ------------------------------------------------------------------------------
    async def search(
        self,
        *,
        agent_id: str,
        model: str,
        query: np.ndarray,
        k: int,
        flt: VectorFilter = VectorFilter(),
        wait: bool = False,
    ) -> list[tuple[str, float]] | None:
        """Ids and exact cosine scores of the top ``k``, best first; None when a set it needs
        is not loaded yet (the caller then searches without the index). A set of up to
        ``wait_rows`` rows is awaited; with ``wait``, any set is (the caller's other way would
        read as many). A search for one kind that has a set of its own reads that set."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        dim = q.shape[0]
        shard = self.shard_for(flt.kinds)
        if shard.kinds is not None:
            flt = replace(flt, kinds=None)  # the set holds nothing else
        key = (agent_id, model, dim, shard.name)
        entry = self._entries.get(key) or self._entry(key)
        loading = entry.loading
        if loading is not None:
            if not wait and entry.load_rows is None:
                entry.load_rows = await self._count(agent_id, model, dim, shard)
            if wait or (entry.load_rows is not None and entry.load_rows <= self.wait_rows):
                await asyncio.shield(loading)
        vs = entry.vectors
        if vs is None:
            return None
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = q / norm
        if k <= 0 or len(vs) == 0:
            return []
        if entry.ann is not None:
            held = entry.pending | entry.changed if entry.changed else entry.pending
            found = self._ann_top_k(entry.ann, vs, q, k, flt, held)
            if found is not None:
                return self._hits(vs, *found)
        rows = vs.rows_matching(flt)
        if (vs.size if rows is None else rows.size) > _THREAD_ROWS:
            exact = await asyncio.to_thread(vs.top_k, q, k, rows=rows)
        else:
            exact = vs.top_k(q, k, rows=rows)
        return self._hits(vs, *exact)

    @staticmethod
    def _hits(vs: VectorSet, rows: np.ndarray, scores: np.ndarray) -> list[tuple[str, float]]:
        hits = []
        for row, score in zip(rows.tolist(), scores.tolist(), strict=True):
            with contextlib.suppress(KeyError):  # removed while a thread searched
                hits.append((vs.id_of(row), float(score)))
        return hits

    def _ann_top_k(
        self,
        ann: AnnIndex,
        vs: VectorSet,
        q: np.ndarray,
        k: int,
        flt: VectorFilter,
        held: set[int] | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """ANN candidates (and the ``held`` rows, not in the index yet), filtered and re-scored
        exactly; None when exact search is better."""
        live = len(vs)
        extra = np.fromiter(held, dtype=np.int64) if held else None
        matching = vs.estimate(flt)
        if matching == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if matching < self.ann_rows:
            return None  # few rows match: scoring just those is exact and cheap
        candidates, ef_search = next((c, e) for rows, c, e in self.breadth if live < rows)
        want = max(k, candidates)
        count = math.ceil(want * live / matching * (1.5 if flt.narrows else 1.0))
        while count <= self.max_candidates:
            if isinstance(ann, USearchIndex):
                ann.expansion_search = max(ef_search, count)
            rows = ann.search(q, count)
            rows = rows[(rows >= 0) & (rows < vs.size)]
            if extra is not None:
                rows = np.union1d(rows, extra[extra < vs.size])
            rows = rows[vs.matches(rows, flt)] if flt.narrows else rows[vs.is_live(rows)]
            if rows.size >= k or count >= live:
                scores = vs.scores(q, rows)
                order = np.lexsort((rows, -scores))[:k]
                return rows[order], scores[order]
            count *= 4
        return None

    # -- changes -----------------------------------------------------------------------------
    def upsert(self, agent_id: str, model: str, rows: VectorRows) -> None:
        """Memories of ``agent_id`` now have these ``model`` vectors (new, or replaced)."""
        if not len(rows) or not self.has_agent(agent_id):
            return
        dim = int(np.asarray(rows.vectors).shape[1])
        parts = self._split(rows)
        ids = set(rows.ids)
        for key, entry in list(self._entries.items()):
            if key[0] != agent_id:
                continue
            mine = parts[key[3]] if key[1:3] == (model, dim) else None
            # The rest are not this set's (any more): another model after a reindex, or a kind
            # the set does not hold.
            gone = ids.difference(mine.ids) if mine is not None else ids
            self._change(entry, functools.partial(_replace, rows=mine, gone=gone))

    def _split(self, rows: VectorRows) -> dict[str, VectorRows | None]:
        """The rows each set holds (None: none), by set name."""
        parts: dict[str, VectorRows | None] = {}
        for shard in self.shards:
            held = [i for i, kind in enumerate(rows.kinds) if shard.holds(kind)]
            if len(held) == len(rows):
                parts[shard.name] = rows
            else:
                parts[shard.name] = rows.take(held) if held else None
        return parts

    def remove(self, ids: list[str], *, agent_id: str | None = None) -> None:
        """Memories deleted (or left without a vector); ``agent_id`` None: look everywhere."""
        if not ids:
            return
        for key, entry in list(self._entries.items()):
            if agent_id is None or key[0] == agent_id:
                self._change(entry, lambda vs: vs.remove(ids))

    def remove_matching(self, agent_id: str, flt: VectorFilter) -> None:
        for key, entry in list(self._entries.items()):
            if key[0] == agent_id:
                self._change(entry, lambda vs: vs.remove_matching(flt))

    def drop_agent(self, agent_id: str) -> None:
        """Forget an agent's sets and their saved indexes (of every model): the agent was
        deleted."""
        for key in [key for key in self._entries if key[0] == agent_id]:
            self._forget(key)
        if self.directory is None or not self.directory.is_dir():
            return
        name = _safe(agent_id)
        for folder in [*self.directory.glob(f"*/{name}"), *self.directory.glob(f"*/{name}~*")]:
            shutil.rmtree(folder, ignore_errors=True)
            _remove_old_layout(folder)

    def reset(self, agent_id: str | None = None) -> None:
        """Forget every set (of ``agent_id``, or of all agents); each loads again on its next
        search. For changes too many to apply one by one."""
        for key in [key for key in self._entries if agent_id is None or key[0] == agent_id]:
            self._forget(key)

    def _forget(self, key: _Key) -> None:
        entry = self._entries.pop(key)
        entry.cancelled = True
        if entry.loading is not None:
            entry.loading.cancel()

    def _change(self, entry: _Entry, change: Callable[[VectorSet], np.ndarray]) -> None:
        vs = entry.vectors
        if vs is None:
            entry.queued.append(change)
            return
        rows = change(vs)
        if not rows.size:
            return
        if entry.changed is not None:
            entry.changed.update(rows.tolist())
        elif entry.ann is not None:
            entry.pending.update(rows.tolist())
            entry.dirty = True
            if len(entry.pending) >= self.apply_rows:
                self._apply_pending(entry)
            self._maybe_save(entry)
        self._maybe_build(entry)

    def _apply_pending(self, entry: _Entry) -> None:
        """Bring the ANN graph up to date with the pending rows."""
        if entry.pending and entry.ann is not None and entry.vectors is not None:
            rows = np.fromiter(entry.pending, dtype=np.int64)
            entry.pending.clear()
            self._apply_rows(entry.ann, entry.vectors, rows)

    def _maybe_save(self, entry: _Entry) -> None:
        if (
            entry.dirty
            and entry.saving is None
            and entry.building is None
            and not self._closed
            and time.monotonic() - entry.saved_at >= self.save_every_s
        ):
            entry.saving = asyncio.get_running_loop().create_task(
                self._save_now(entry), name=f"carrier-vectors-save-{_describe(entry.key)}"
            )

    async def _save_now(self, entry: _Entry) -> None:
        try:
            await self._save(entry)
        finally:
            entry.saving = None

    @staticmethod
    def _apply_rows(ann: AnnIndex, vs: VectorSet, rows: np.ndarray) -> None:
        rows = np.unique(rows)
        ann.remove(rows)
        live = rows[vs.is_live(rows)]
        if live.size:
            # The event loop waits for this call: every core finishes it sooner.
            _add(ann, live, vs.vectors(), threads=min(live.size, os.cpu_count() or 1))

    # -- ANN build, persistence --------------------------------------------------------------
    def _maybe_build(self, entry: _Entry) -> None:
        vs = entry.vectors
        if (
            vs is None
            or entry.ann is not None
            or entry.building is not None
            or entry.ann_failed
            or self._closed
            or len(vs) < self.ann_rows
        ):
            return
        entry.changed = set()
        entry.pending.clear()  # the build covers every row
        entry.building = asyncio.get_running_loop().create_task(
            self._build(entry, vs), name=f"carrier-vectors-ann-{_describe(entry.key)}"
        )

    async def _build(self, entry: _Entry, vs: VectorSet) -> None:
        try:
            ann, added = await self._restore(entry, vs)
            restored = ann is not None
            if ann is None:
                ann = self._ann_factory(vs.dim)
                if ann is None:
                    entry.ann_failed = True
                    logger.info(
                        "no ANN library installed: vector search stays exact (%s)",
                        ANN_INSTALL_HINT,
                    )
                    return
                rows = vs.live_rows()
                vectors = vs.vectors()
                for start in range(0, rows.size, _BUILD_CHUNK):
                    if entry.cancelled or self._closed:
                        return
                    chunk = rows[start : start + _BUILD_CHUNK]
                    await asyncio.to_thread(_add, ann, chunk, vectors)
            if entry.cancelled:
                return
            changed = np.fromiter(entry.changed or (), dtype=np.int64)
            entry.changed = None  # from now on changes go to the index (or to a save's hold)
            if changed.size:
                self._apply_rows(ann, vs, changed)
            entry.ann = ann
            entry.saved_at = time.monotonic()
            entry.dirty = not restored or bool(added) or bool(changed.size)
            logger.debug(
                "ANN index ready: %s, %d rows (%s)",
                _describe(entry.key),
                len(ann),
                f"reloaded, {added} added" if restored else "built",
            )
            if entry.dirty:
                await self._save(entry)
        except Exception:
            entry.ann_failed = True
            logger.exception(
                "building the ANN index failed (%s); its searches stay exact", _describe(entry.key)
            )
        finally:
            entry.changed = None
            entry.building = None

    def _folder(self, key: _Key) -> Path | None:
        """Where a set's saved indexes go: ``<model>-<dim>/<agent>`` for the main set,
        ``<agent>~<kind>`` beside it for a set of one kind (``~`` is never in a safe name)."""
        if self.directory is None:
            return None
        agent_id, model, dim, shard = key
        name = _safe(agent_id) + (f"~{_safe(shard)}" if shard else "")
        return self.directory / f"{_safe(model)}-{dim}" / name

    async def _restore(self, entry: _Entry, vs: VectorSet) -> tuple[AnnIndex | None, int]:
        """The saved index patched to ``vs`` (see the module docstring) and how many rows were
        removed or added; ``(None, 0)`` when there is none or it keeps too little."""
        folder = self._folder(entry.key)
        if folder is None or len(vs) < self.persist_rows or not folder.is_dir():
            return None, 0
        saved = await asyncio.to_thread(_latest, folder)
        if saved is None:
            return None, 0
        graph, ids, prints = saved
        old = np.arange(len(ids), dtype=np.int64)
        new, same = await asyncio.to_thread(_match, vs, ids, prints)
        if entry.cancelled or self._closed:
            return None, 0
        if np.count_nonzero(same) < _MIN_KEPT * len(vs):
            logger.info("the saved vector index in %s fits too few rows; building one", folder)
            return None, 0
        ann = await asyncio.to_thread(USearchIndex.restore, graph, vs.dim)
        if ann is None or entry.cancelled or self._closed:
            return None, 0
        stale = old[~same & (new != _EMPTY)]
        await asyncio.to_thread(_patch, ann, stale, old[same], new[same])
        later = np.setdiff1d(vs.live_rows(), new[same], assume_unique=True)
        for start in range(0, later.size, _BUILD_CHUNK):
            if entry.cancelled or self._closed:
                return None, 0
            await asyncio.to_thread(_add, ann, later[start : start + _BUILD_CHUNK], vs.vectors())
        return ann, int(stale.size + later.size)

    async def _save(self, entry: _Entry) -> None:
        folder = self._folder(entry.key)
        vs, ann = entry.vectors, entry.ann
        if folder is None or vs is None or ann is None or len(vs) < self.persist_rows:
            return
        self._apply_pending(entry)  # the manifest lists every row: the graph must hold them
        entry.dirty = False
        entry.saved_at = time.monotonic()
        entry.changed = set()  # held while the thread reads the graph; searched beside it
        path: Path | None = None
        rows = vs.size  # the graph holds these (changes from here on are held)
        ids = vs.ids(rows)
        try:
            path = await asyncio.to_thread(
                _write, ann, folder, ids, lambda: vs.fingerprints(np.arange(rows))
            )
        except asyncio.CancelledError:
            # The thread may still be reading the graph: stop using it rather than change it.
            entry.ann, entry.changed = None, None
            raise
        except Exception as exc:
            logger.warning("cannot save the vector index in %s: %s", folder, exc)
        held = np.fromiter(entry.changed or (), dtype=np.int64)
        entry.changed = None
        if entry.cancelled:  # the set was dropped (its agent deleted) while the file was written
            if path is not None:
                _discard(path)
            return
        if held.size:
            self._apply_rows(ann, vs, held)
            entry.dirty = True  # saved again later
            if path is not None and bool((held < rows).any()):
                # A row the save covers changed while it was written: its manifest may describe
                # a vector the graph lacks. Not kept. (Rows appended meanwhile lie past the rows
                # it covers: a start reloads it and adds them.)
                _discard(path)

    async def close(self) -> None:
        """Stop loads and builds, save changed indexes. Safe to call twice."""
        self._closed = True
        for entry in self._entries.values():
            entry.cancelled = entry.ann is None
            if entry.loading is not None:
                entry.loading.cancel()
        tasks = [t for e in self._entries.values() for t in (e.loading, e.building, e.saving) if t]
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for entry in self._entries.values():
            if entry.dirty:
                await self._save(entry)
        self._entries.clear()

    def remove_files(self) -> None:
        if self.directory is not None and self.directory.exists():
            shutil.rmtree(self.directory)


def _replace(vs: VectorSet, *, rows: VectorRows | None, gone: set[str]) -> np.ndarray:
    """Remove the ``gone`` memories, upsert ``rows``; the rows changed."""
    freed = vs.remove(gone) if gone else np.zeros(0, dtype=np.int64)
    return freed if rows is None else np.concatenate([freed, vs.upsert(rows)])


def _add(ann: AnnIndex, rows: np.ndarray, vectors: np.ndarray, *, threads: int = 0) -> None:
    """Add ``rows`` (of ``vectors``) to ``ann`` on ``threads`` threads (0: a background build's
    :func:`build_threads`)."""
    if isinstance(ann, USearchIndex):
        ann.add(rows, vectors[rows], threads=threads or build_threads())
    else:
        ann.add(rows, vectors[rows])


def _write(
    ann: AnnIndex, folder: Path, ids: list[str | None], prints_of: Callable[[], np.ndarray]
) -> Path:
    """Save ``ann`` with its manifest (the id and fingerprint of each row), both under names of
    this save's own, the manifest last; older saves of the set are removed. Returns the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    graph, manifest = folder / f"{stamp}.usearch", folder / f"{stamp}{_MANIFEST}"
    tmp = folder / f".{stamp}.tmp"
    try:
        ann.save(tmp)
        tmp.replace(graph)
        packed = "\0".join(memory_id or "" for memory_id in ids).encode()
        with tmp.open("wb") as out:
            np.savez(
                out,
                format=np.int64(_FORMAT),
                rows=np.int64(len(ids)),
                ids=np.frombuffer(packed, dtype=np.uint8),
                fingerprints=prints_of(),
            )
        tmp.replace(manifest)
    finally:
        tmp.unlink(missing_ok=True)
    for old in folder.iterdir():
        if not old.name.startswith((stamp, ".")):
            old.unlink(missing_ok=True)
    _remove_old_layout(folder)
    return manifest


def _latest(folder: Path) -> tuple[Path, list[str], np.ndarray] | None:
    """The newest complete save in ``folder``: its graph, row ids ("" for an empty row) and
    fingerprints; None if there is none (or it cannot be read)."""
    for manifest in sorted(folder.glob(f"*{_MANIFEST}"), reverse=True):
        graph = _graph_of(manifest)
        try:
            with np.load(manifest) as data:
                if int(data["format"]) != _FORMAT or not graph.exists():
                    continue
                rows = int(data["rows"])
                ids = data["ids"].tobytes().decode().split("\0") if rows else []
                prints = np.asarray(data["fingerprints"], dtype=np.float32)
        except (OSError, ValueError, KeyError) as exc:
            logger.warning("cannot read the saved vector index %s: %s", manifest, exc)
            continue
        if len(ids) == rows == prints.shape[0]:
            return graph, ids, prints
    return None


_EMPTY = -2
"""In :func:`_match`: a saved row that held no memory (not in the graph)."""


def _match(vs: VectorSet, ids: list[str], prints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each saved row: the row of its memory in ``vs`` (-1: gone, ``_EMPTY``: it held
    none) and whether that row still has the vector it had (same fingerprint)."""
    new = np.empty(len(ids), dtype=np.int64)
    for i, memory_id in enumerate(ids):
        row = vs.row_of(memory_id) if memory_id else _EMPTY
        new[i] = -1 if row is None else row
    same = new >= 0
    same[same] = np.all(vs.fingerprints(new[same]) == prints[same], axis=1)
    return new, same


def _patch(ann: AnnIndex, stale: np.ndarray, keep: np.ndarray, to: np.ndarray) -> None:
    """Remove the ``stale`` keys, then rename ``keep`` to ``to`` (through keys above any row,
    so that a key is never renamed onto one not yet moved)."""
    assert isinstance(ann, USearchIndex)
    ann.remove(stale)
    ann.rename(keep, keep + _RENAME_OFFSET)
    ann.rename(keep + _RENAME_OFFSET, to)


def _discard(manifest: Path) -> None:
    """Remove a save (its manifest first: a graph without one is never read)."""
    manifest.unlink(missing_ok=True)
    _graph_of(manifest).unlink(missing_ok=True)


def _graph_of(manifest: Path) -> Path:
    """The graph file a manifest describes (same name, ``.usearch``)."""
    return manifest.with_name(manifest.name[: -len(_MANIFEST)] + ".usearch")


def _remove_old_layout(folder: Path) -> None:
    """Files of the layout before fingerprinted names (``<agent>.usearch`` and ``.json``)."""
    for suffix in (".usearch", ".json"):
        (folder.parent / f"{folder.name}{suffix}").unlink(missing_ok=True)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _describe(key: _Key) -> str:
    agent_id, model, dim, shard = key
    return f"agent {agent_id}, {model} ({dim}), {shard or 'main'} set"


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name)[:80] or "_"
