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

Once a set holds ``ann_rows`` vectors it gets an ANN index (:mod:`carrier.memory.index.ann`),
made in the background (:mod:`~carrier.memory.index._build`: its saved graph reloaded and patched
to the rows as loaded, or a new one built in a worker thread); searches stay exact until it is
ready, and rows that change meanwhile are re-added after it. Once it is ready, changed rows reach
it in batches (``apply_rows``), the way vector databases grow a segment before indexing it:
meanwhile they are searched exactly beside it. An index of ``persist_rows`` or more is saved
beside the database (:mod:`~carrier.memory.index._persist`) on close and, while it runs, at most
every ``save_every_s`` (15 minutes), so that a start after a crash reloads it and adds only the
rows written since.

Filters: sets per agent make the agent filter free. The other filters (room, entity, kinds,
time, excluded ids) are applied to ANN candidates after the fact, or answered exactly over just
the rows they keep where that is cheaper, as :mod:`~carrier.memory.index._search` plans. Every
returned score is the exact cosine, re-computed from the float32 rows. The state kept per set is
an :class:`~carrier.memory.index._entry.Entry`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from carrier.memory.index._build import AnnFactory, build
from carrier.memory.index._entry import Entry, Key, Shard, describe
from carrier.memory.index._entry import replace as replace_rows
from carrier.memory.index._persist import remove_agent_files, save
from carrier.memory.index._search import BREADTH, search_set
from carrier.memory.index.ann import default_ann
from carrier.memory.index.rows import VectorFilter, VectorRows, VectorSet

__all__ = ["BREADTH", "Loader", "Shard", "VectorIndex"]

logger = logging.getLogger(__name__)

Loader = Callable[[str, str, int, Shard], AsyncIterator[VectorRows]]
"""``(agent_id, embedding_model, dim, shard)`` → pages of that agent's vectors of that model and
dimension, of the kinds the shard holds, in insertion order."""
Counter = Callable[[str, str, int, Shard], Awaitable[int]]
"""The same arguments → about how many vectors :data:`Loader` would yield."""


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
        self._entries: dict[Key, Entry] = {}
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

    def _entry(self, key: Key) -> Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = Entry(key)
            entry.loading = asyncio.get_running_loop().create_task(
                self._load_entry(entry), name=f"carrier-vectors-load-{describe(key)}"
            )
        return entry

    async def _load_entry(self, entry: Entry) -> None:
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
            logger.debug("loaded %d vectors: %s", len(vs), describe(entry.key))
        except Exception:
            logger.exception("loading vectors failed: %s", describe(entry.key))
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
        return await search_set(
            entry,
            vs,
            q,
            k,
            flt,
            ann_rows=self.ann_rows,
            breadth=self.breadth,
            max_candidates=self.max_candidates,
        )

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
            if (
                mine is None
                and entry.vectors is not None
                and not any(map(entry.vectors.__contains__, gone))
            ):
                continue  # none of them is this set's, nor was
            self._change(entry, functools.partial(replace_rows, rows=mine, gone=gone))

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
        remove_agent_files(self.directory, agent_id)

    def reset(self, agent_id: str | None = None) -> None:
        """Forget every set (of ``agent_id``, or of all agents); each loads again on its next
        search. For changes too many to apply one by one."""
        for key in [key for key in self._entries if agent_id is None or key[0] == agent_id]:
            self._forget(key)

    def _forget(self, key: Key) -> None:
        entry = self._entries.pop(key)
        entry.cancelled = True
        if entry.loading is not None:
            entry.loading.cancel()

    def _change(self, entry: Entry, change: Callable[[VectorSet], np.ndarray]) -> None:
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
                entry.apply_pending()
            self._maybe_save(entry)
        self._maybe_build(entry)

    def _maybe_save(self, entry: Entry) -> None:
        if (
            entry.dirty
            and entry.saving is None
            and entry.building is None
            and not self._closed
            and time.monotonic() - entry.saved_at >= self.save_every_s
        ):
            entry.saving = asyncio.get_running_loop().create_task(
                self._save_now(entry), name=f"carrier-vectors-save-{describe(entry.key)}"
            )

    async def _save_now(self, entry: Entry) -> None:
        try:
            await save(entry, self.directory, persist_rows=self.persist_rows)
        finally:
            entry.saving = None

    # -- ANN build ---------------------------------------------------------------------------
    def _maybe_build(self, entry: Entry) -> None:
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
            build(
                entry,
                vs,
                factory=self._ann_factory,
                directory=self.directory,
                persist_rows=self.persist_rows,
                closed=lambda: self._closed,
            ),
            name=f"carrier-vectors-ann-{describe(entry.key)}",
        )

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
                await save(entry, self.directory, persist_rows=self.persist_rows)
        self._entries.clear()

    def remove_files(self) -> None:
        if self.directory is not None and self.directory.exists():
            shutil.rmtree(self.directory)
