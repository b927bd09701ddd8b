"""The vectors of one agent and one embedding model, held in memory with what search filters on.

A :class:`VectorSet` keeps a growing float32 matrix of unit-length rows, one per memory, beside
small arrays of the fields a search filters on (room, entity, kind, creation time). Exact search
is one matrix-vector product over it (a few milliseconds at 100k rows), so a search never reads
vectors from the database. A memory keeps its row for the life of the set, which makes row
numbers usable as the keys of an ANN index built over the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import nullcontext

import numpy as np

from carrier.memory._blas import one_blas_thread
from carrier.memory.index._postings import Codes, Postings
from carrier.memory.index._records import VectorFilter, VectorRows

__all__ = ["VectorFilter", "VectorRows", "VectorSet", "among"]

_MIN_CAPACITY = 1024
_FEW_ROWS = 4
"""Upserts of up to this many memories go row by row (:meth:`VectorSet._upsert_few`)."""


_ONE_THREAD_PRODUCT = 9_216
"""A matrix-vector product of fewer elements runs on one BLAS thread anyway (OpenBLAS's
threshold: 2304 x GEMM_MULTITHREAD_THRESHOLD, 4 by default), so a scan this small (a character's
knowledge) skips switching the thread count, which costs more than the product."""
_POSTINGS_SHARE = 8
"""A filtered search reads a room's (entity's, kinds') listed rows when they are fewer than
1/8 of all rows; otherwise it tests every row, which is then about as cheap."""


def among(rows: np.ndarray, others: Sequence[int] | np.ndarray) -> np.ndarray:
    """Which of ``rows`` are in ``others``, as a boolean array: a binary search of each in the
    sorted others. ``np.isin`` sorts both and costs ~50 us a call on a turn's hundred rows (~0.3
    ms after the loop waited for the embedding); this, ~9 us (~0.1 ms)."""
    sorted_others = np.sort(np.asarray(others, dtype=np.int64))
    if not sorted_others.size:
        return np.zeros(rows.shape, dtype=bool)
    at = np.searchsorted(sorted_others, rows)
    at[at == sorted_others.size] = 0
    return sorted_others[at] == rows


class VectorSet:
    """Unit-length vectors of ``dim`` dimensions with their memory ids and filter fields.

    Rows are appended; a removed memory leaves a dead row behind (its vector zeroed) until the set
    is rebuilt. Not thread-safe: mutate it from one thread (the event loop); readers in other
    threads may see a row change under them, which an ANN build tolerates (it re-adds rows that
    changed while it ran).
    """

    def __init__(self, dim: int) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self._size = 0
        self._live_count = 0
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._live = np.zeros(0, dtype=bool)
        self._room = np.zeros(0, dtype=np.int32)
        self._entity = np.zeros(0, dtype=np.int32)
        self._kind = np.zeros(0, dtype=np.int16)
        self._created = np.zeros(0, dtype=np.int64)
        self._ids: list[str | None] = []
        self._row_of: dict[str, int] = {}
        self._rooms = Codes()
        self._entities = Codes()
        self._kinds = Codes()
        self._room_counts = np.zeros(0, dtype=np.int64)
        self._entity_counts = np.zeros(0, dtype=np.int64)
        self._kind_counts = np.zeros(0, dtype=np.int64)
        self._room_rows = Postings()
        self._entity_rows = Postings()
        self._kind_rows = Postings()

    # -- size --------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Live rows (memories held)."""
        return self._live_count

    @property
    def size(self) -> int:
        """Rows used, dead ones included: row numbers are ``0 .. size - 1``."""
        return self._size

    @property
    def dead(self) -> int:
        return self._size - self._live_count

    @property
    def nbytes(self) -> int:
        """Memory held by the arrays (the id map is extra, ~150 bytes a memory)."""
        arrays = (self._vectors, self._live, self._room, self._entity, self._kind, self._created)
        return sum(a.nbytes for a in arrays)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._row_of

    def kind_of(self, memory_id: str) -> str | None:
        """The kind of a memory held here (None: not held)."""
        row = self._row_of.get(memory_id)
        return None if row is None else self._kinds.values[int(self._kind[row])]

    def row_of(self, memory_id: str) -> int | None:
        return self._row_of.get(memory_id)

    def ids_of(self, rows: list[int]) -> list[str | None]:
        """The memory ids of ``rows`` (None for a dead row)."""
        ids = self._ids
        return [ids[row] for row in rows]

    def id_of(self, row: int) -> str:
        memory_id = self._ids[row]
        if memory_id is None:
            raise KeyError(f"row {row} holds no memory")
        return memory_id

    def vectors(self) -> np.ndarray:
        """A read-only view of rows ``0 .. size - 1`` (dead rows are zero)."""
        view = self._vectors[: self._size]
        view.flags.writeable = False
        return view

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self._live[: self._size])

    def is_live(self, rows: np.ndarray) -> np.ndarray:
        return self._live[rows]

    # -- changes -----------------------------------------------------------------------------
    def upsert(self, rows: VectorRows) -> np.ndarray:
        """Add new memories, replace the vectors of known ones; returns the rows written."""
        n = len(rows)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        vectors = np.array(rows.vectors, dtype=np.float32)  # a copy: normalized in place below
        if vectors.shape != (n, self.dim):
            raise ValueError(f"expected vectors of shape {(n, self.dim)}, got {vectors.shape}")
        if len(set(rows.ids)) != n:  # an id twice in one batch: its last version counts
            last = list({memory_id: i for i, memory_id in enumerate(rows.ids)}.values())
            rows, vectors, n = rows.take(last), vectors[last], len(last)
        if n <= _FEW_ROWS:
            return self._upsert_few(rows, vectors)
        targets = np.empty(n, dtype=np.int64)
        fresh = 0
        for i, memory_id in enumerate(rows.ids):
            row = self._row_of.get(memory_id)
            if row is None:
                row = self._size + fresh
                self._row_of[memory_id] = row
                fresh += 1
            targets[i] = row
        self._reserve(self._size + fresh)
        new_ids: list[str | None] = [None] * fresh
        for i, memory_id in enumerate(rows.ids):
            row = int(targets[i])
            if row >= self._size:
                new_ids[row - self._size] = memory_id
        self._ids.extend(new_ids)
        was_live = self._live[targets]
        self._tally(targets[was_live], -1)  # replaced rows: their old fields no longer count
        self._size += fresh
        self._live_count += int(np.count_nonzero(~was_live))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        self._vectors[targets] = vectors
        self._live[targets] = True
        for codes, values, field_codes, postings in (
            (self._room, rows.rooms, self._rooms, self._room_rows),
            (self._entity, rows.entities, self._entities, self._entity_rows),
            (self._kind, rows.kinds, self._kinds, self._kind_rows),
        ):
            new = np.array([field_codes.encode(v) for v in values], dtype=codes.dtype)
            listed = was_live & (codes[targets] == new)  # a known row whose field kept its value
            codes[targets] = new
            postings.add(new[~listed], targets[~listed])
        self._created[targets] = rows.created_us
        self._tally(targets, +1)
        return targets

    def _upsert_few(self, rows: VectorRows, vectors: np.ndarray) -> np.ndarray:
        """:meth:`upsert` of a few distinct memories (a turn's), row by row: the batch way's two
        dozen numpy calls cost more than their work on a row or two (~45 against ~15 us)."""
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        targets = []
        for i, memory_id in enumerate(rows.ids):
            row = self._row_of.get(memory_id)
            was_live = row is not None and bool(self._live[row])
            if row is None:
                row = self._size
                self._reserve(row + 1)
                self._row_of[memory_id] = row
                self._ids.append(memory_id)
                self._size += 1
            if was_live:
                self._count(row, -1)  # its old fields no longer count
            else:
                self._live_count += 1
            self._vectors[row] = vectors[i]
            self._live[row] = True
            for codes, value, field_codes, postings in (
                (self._room, rows.rooms[i], self._rooms, self._room_rows),
                (self._entity, rows.entities[i], self._entities, self._entity_rows),
                (self._kind, rows.kinds[i], self._kinds, self._kind_rows),
            ):
                code = field_codes.encode(value)
                if not (was_live and codes[row] == code):  # listed already, if it kept it
                    postings.add_one(code, row)
                codes[row] = code
            self._created[row] = rows.created_us[i]
            self._count(row, +1)
            targets.append(row)
        return np.array(targets, dtype=np.int64)

    def _fields(self) -> tuple[tuple[np.ndarray, str, Codes], ...]:
        """Each filter field's codes by row, the name of its counts of live rows, its codes."""
        return (
            (self._room, "_room_counts", self._rooms),
            (self._entity, "_entity_counts", self._entities),
            (self._kind, "_kind_counts", self._kinds),
        )

    def _counts(self, counts_name: str, field_codes: Codes) -> np.ndarray:
        """A field's counts of live rows by code, grown to its codes."""
        counts: np.ndarray = getattr(self, counts_name)
        if counts.shape[0] < len(field_codes.codes):
            grown = np.zeros(max(len(field_codes.codes), 2 * counts.shape[0]), dtype=np.int64)
            grown[: counts.shape[0]] = counts
            counts = grown
            setattr(self, counts_name, counts)
        return counts

    def _tally(self, rows: np.ndarray, sign: int) -> None:
        """Keep the per-room, per-entity and per-kind counts of live rows (for selectivity)."""
        for codes, counts_name, field_codes in self._fields():
            counts = self._counts(counts_name, field_codes)
            if rows.size:
                np.add.at(counts, codes[rows], sign)

    def _count(self, row: int, sign: int) -> None:
        """:meth:`_tally` of one row."""
        for codes, counts_name, field_codes in self._fields():
            self._counts(counts_name, field_codes)[codes[row]] += sign

    def estimate(self, flt: VectorFilter) -> int:
        """About how many live rows the filter matches, without looking at every row: exact for
        one room, entity or kinds filter; combined filters are taken as independent."""
        live = self._live_count
        if not flt.narrows or live == 0:
            return live
        share = 1.0
        if flt.room_id is not None:
            code = self._rooms.get(flt.room_id)
            share *= self._room_counts[code] / live if code >= 0 else 0.0
        if flt.entity_id is not None:
            code = self._entities.get(flt.entity_id)
            share *= self._entity_counts[code] / live if code >= 0 else 0.0
        if flt.kinds is not None:
            codes = [c for c in (self._kinds.get(k) for k in flt.kinds) if c >= 0]
            share *= int(self._kind_counts[codes].sum()) / live if codes else 0.0
        if flt.since_us is not None or flt.before_us is not None:
            created = self._created[: self._size]
            window = self._live[: self._size].copy()
            if flt.since_us is not None:
                window &= created >= flt.since_us
            if flt.before_us is not None:
                window &= created < flt.before_us
            share *= int(np.count_nonzero(window)) / live
        return max(0, round(live * share) - len(flt.exclude_ids) if share else 0)

    def remove(self, ids: Iterable[str]) -> np.ndarray:
        """Forget memories by id (unknown ids are ignored); returns the rows freed."""
        rows = [row for row in (self._row_of.pop(i, None) for i in ids) if row is not None]
        return self._kill(np.array(rows, dtype=np.int64))

    def remove_matching(self, flt: VectorFilter) -> np.ndarray:
        """Forget every memory the filter matches; returns the rows freed."""
        rows = self.rows_matching(flt)
        if rows is None:
            rows = self.live_rows()
        for row in rows:
            memory_id = self._ids[row]
            if memory_id is not None:
                self._row_of.pop(memory_id, None)
        return self._kill(rows)

    def _kill(self, rows: np.ndarray) -> np.ndarray:
        if rows.size:
            rows = np.unique(rows)
            self._tally(rows[self._live[rows]], -1)
            self._live_count -= int(np.count_nonzero(self._live[rows]))
            self._live[rows] = False
            self._vectors[rows] = 0.0
            for row in rows:
                self._ids[row] = None
        return rows

    def _reserve(self, needed: int) -> None:
        capacity = self._vectors.shape[0]
        if needed <= capacity:
            return
        new_capacity = max(needed, capacity * 2, _MIN_CAPACITY)
        # A new array rather than resize(): an ANN build in another thread may hold a view of the
        # old one, which stays valid.
        vectors = np.zeros((new_capacity, self.dim), dtype=np.float32)
        vectors[: self._size] = self._vectors[: self._size]
        self._vectors = vectors
        for name in ("_live", "_room", "_entity", "_kind", "_created"):
            old = getattr(self, name)
            grown = np.zeros(new_capacity, dtype=old.dtype)
            grown[: self._size] = old[: self._size]
            setattr(self, name, grown)

    # -- search ------------------------------------------------------------------------------
    def mask(self, flt: VectorFilter) -> np.ndarray | None:
        """Live rows the filter matches, as a boolean array over ``0 .. size - 1``; ``None`` when
        the filter narrows nothing (every live row matches)."""
        if not flt.narrows:
            return None
        n = self._size
        mask = self._live[:n].copy()
        if flt.room_id is not None:
            mask &= self._room[:n] == self._rooms.get(flt.room_id)
        if flt.entity_id is not None:
            mask &= self._entity[:n] == self._entities.get(flt.entity_id)
        if flt.kinds is not None:
            mask &= self._kind_allowed(flt.kinds)[self._kind[:n]]
        if flt.since_us is not None:
            mask &= self._created[:n] >= flt.since_us
        if flt.before_us is not None:
            mask &= self._created[:n] < flt.before_us
        for memory_id in flt.exclude_ids:
            row = self._row_of.get(memory_id)
            if row is not None:
                mask[row] = False
        return mask

    def rows_matching(self, flt: VectorFilter) -> np.ndarray | None:
        """Live rows the filter matches, ascending; ``None`` when it narrows nothing. A room,
        entity or kinds filter that keeps few rows reads their lists instead of every row."""
        if not flt.narrows:
            return None
        lists = []
        if flt.room_id is not None:
            lists.append(self._room_rows.rows(self._rooms.get(flt.room_id)))
        if flt.entity_id is not None:
            lists.append(self._entity_rows.rows(self._entities.get(flt.entity_id)))
        if flt.kinds is not None:
            codes = [self._kinds.get(kind) for kind in flt.kinds]
            parts = [self._kind_rows.rows(code) for code in codes if code >= 0]
            lists.append(np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64))
        if lists:
            fewest = min(lists, key=len)
            if fewest.size * _POSTINGS_SHARE < self._size:
                rows = np.unique(fewest)  # sorted; a row listed twice (its kind changed) once
                return rows[self.matches(rows, flt)]
        mask = self.mask(flt)
        assert mask is not None
        return np.flatnonzero(mask)

    def matches(self, rows: np.ndarray, flt: VectorFilter) -> np.ndarray:
        """Which of ``rows`` are live and match the filter (without a mask over every row)."""
        ok = self._live[rows].copy()
        if flt.room_id is not None:
            ok &= self._room[rows] == self._rooms.get(flt.room_id)
        if flt.entity_id is not None:
            ok &= self._entity[rows] == self._entities.get(flt.entity_id)
        if flt.kinds is not None:
            ok &= self._kind_allowed(flt.kinds)[self._kind[rows]]
        if flt.since_us is not None:
            ok &= self._created[rows] >= flt.since_us
        if flt.before_us is not None:
            ok &= self._created[rows] < flt.before_us
        if flt.exclude_ids:
            excluded = [self._row_of.get(memory_id) for memory_id in flt.exclude_ids]
            ok &= ~among(rows, [row for row in excluded if row is not None])
        return ok

    def _kind_allowed(self, kinds: frozenset[str]) -> np.ndarray:
        """A lookup table over kind codes: True for the codes of ``kinds`` (np.isin costs ~0.2
        ms a call on a few hundred rows; indexing a table, microseconds)."""
        allowed = np.zeros(max(len(self._kinds.codes), 1), dtype=bool)
        for kind in kinds:
            code = self._kinds.get(kind)
            if code >= 0:
                allowed[code] = True
        return allowed

    def scores(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Exact cosine of ``query`` (unit length) with the given rows."""
        return self._vectors[rows] @ query

    def top_k(
        self,
        query: np.ndarray,
        k: int,
        mask: np.ndarray | None = None,
        *,
        rows: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-k: rows and cosine scores, best first, ties by row; ``query`` unit length.

        Among live rows, or those of ``mask`` (:meth:`mask`), or ``rows`` (ascending live rows,
        :meth:`rows_matching`); when they are few, only they are scored.
        """
        n = self._size
        if rows is not None:
            candidates = rows
        elif mask is None and self._live_count == n:
            candidates = None  # every row: one matrix-vector product, no gather
        else:
            candidates = np.flatnonzero(self._live[:n] if mask is None else mask)
        whole = candidates is None or candidates.size * 4 >= n
        scored = n if whole or candidates is None else candidates.size
        with one_blas_thread() if scored * self.dim >= _ONE_THREAD_PRODUCT else nullcontext():
            if whole:
                scores = self._vectors[:n] @ query
                if candidates is not None:
                    scores = scores[candidates]
            else:
                scores = self._vectors[candidates] @ query
        m = scores.shape[0]
        k = min(k, m)
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        top = np.argpartition(-scores, k - 1)[:k] if k < m else np.arange(m)
        rows = top if candidates is None else candidates[top]
        order = np.lexsort((rows, -scores[top]))
        return rows[order].astype(np.int64), scores[top][order].astype(np.float32)

    # -- identity ----------------------------------------------------------------------------
    def ids(self, rows: int) -> list[str | None]:
        """The memory ids of rows ``0 .. rows - 1`` (None for a dead row)."""
        return list(self._ids[:rows])

    def fingerprints(self, rows: np.ndarray) -> np.ndarray:
        """``(len(rows), 2)`` float32: two rounded projections of each row's vector. Equal
        fingerprints mean (all but surely) the same vector; a saved index uses them to tell
        which of its rows still hold what they held."""
        probes = np.random.default_rng(1).standard_normal((self.dim, 2)).astype(np.float32)
        out = np.empty((len(rows), 2), dtype=np.float32)
        with one_blas_thread():
            for start in range(0, len(rows), 65_536):  # a gather of every row at once is big
                part = rows[start : start + 65_536]
                out[start : start + len(part)] = np.round(self._vectors[part] @ probes, 4)
        return out
