"""VectorIndex: background loading, ANN search with filters, keeping in step, persistence."""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from carrier.memory.index import Shard, VectorFilter, VectorIndex, VectorRows
from carrier.memory.index.ann import AnnIndex, USearchIndex, default_ann
from carrier.memory.vector import cosine_top_k

pytest.importorskip("usearch", reason="usearch is not installed: make install-dev")

AGENT, MODEL, DIM = "agent", "m:32", 32


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """Vectors around 40 centres: neighbourhoods like real embeddings have."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, DIM))
    data = centres[rng.integers(0, 40, n)] + 0.35 * rng.normal(size=(n, DIM))
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


class Source:
    """A store stand-in: rows in memory, optionally held back until ``release``."""

    def __init__(
        self, vectors: np.ndarray, *, hold: bool = False, kinds: list[str] | None = None
    ) -> None:
        self.vectors = vectors
        self.ids = [f"m{i}" for i in range(len(vectors))]
        self.rooms = [f"r{i % 3}" for i in range(len(vectors))]
        self.kinds = kinds
        """Each row's kind (None: facts and messages in turn)."""
        self.released = asyncio.Event()
        if not hold:
            self.released.set()
        self.loads: collections.Counter[str] = collections.Counter()
        """Loads by set."""

    def rows(self, start: int = 0, stop: int | None = None) -> VectorRows:
        stop = len(self.ids) if stop is None else stop
        return VectorRows(
            ids=self.ids[start:stop],
            rooms=self.rooms[start:stop],
            entities=["e"] * (stop - start),
            kinds=(
                self.kinds[start:stop]
                if self.kinds is not None
                else ["message" if i % 2 else "fact" for i in range(start, stop)]
            ),
            created_us=list(range(start, stop)),
            vectors=self.vectors[start:stop],
        )

    async def load(
        self, agent_id: str, model: str, dim: int, shard: Shard
    ) -> AsyncIterator[VectorRows]:
        self.loads[shard.name or "main"] += 1
        await self.released.wait()
        for start in range(0, len(self.ids), 1000):
            page = self.rows(start, min(start + 1000, len(self.ids)))
            yield page.take([i for i, kind in enumerate(page.kinds) if shard.holds(kind)])

    async def count(self, agent_id: str, model: str, dim: int, shard: Shard) -> int:
        return len(self.ids)


class ExactAnn(AnnIndex):
    """A brute-force 'ANN' whose first add waits for a gate: makes build timing testable."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.rows: dict[int, np.ndarray] = {}
        self.gate = gate

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        if self.gate is not None:
            self.gate.wait(timeout=30)
            self.gate = None
        for key, vector in zip(keys.tolist(), vectors, strict=True):
            self.rows[key] = np.array(vector)

    def remove(self, keys: np.ndarray) -> None:
        for key in keys.tolist():
            self.rows.pop(key, None)

    def search(self, query: np.ndarray, count: int) -> np.ndarray:
        keys = np.array(sorted(self.rows), dtype=np.int64)
        if not keys.size:
            return keys
        top, _ = cosine_top_k(query, np.stack([self.rows[k] for k in keys]), count)
        return keys[top]

    def save(self, path: Path) -> None:
        raise NotImplementedError

    @property
    def memory_bytes(self) -> int:
        return 0


def exact_ids(
    source: Source, query: np.ndarray, k: int, keep: np.ndarray | None = None
) -> list[str]:
    rows = np.arange(len(source.ids)) if keep is None else np.flatnonzero(keep)
    top, _ = cosine_top_k(query, source.vectors[rows], k)
    return [source.ids[rows[i]] for i in top]


async def test_index_search_waits_for_small_sets_and_falls_back_for_big_ones() -> None:
    source = Source(clustered(300), hold=True)
    index = VectorIndex(load=source.load, count=source.count, wait_rows=100, ann_rows=10_000)
    query = source.vectors[0]
    assert await index.search(agent_id=AGENT, model=MODEL, query=query, k=3) is None
    assert not index.loaded(AGENT, MODEL, DIM)
    source.released.set()
    await index.prepare(AGENT, MODEL, DIM)
    hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=3)
    assert hits is not None and [i for i, _ in hits] == exact_ids(source, query, 3)
    assert source.loads == {"main": 1, "knowledge": 1}  # each set loaded once

    small = Source(clustered(50))
    index = VectorIndex(load=small.load, count=small.count, wait_rows=100)
    hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=3)
    assert hits is not None and len(hits) == 3  # awaited: no fallback for a small set
    await index.close()


async def test_index_search_waits_for_a_big_load_when_the_fallback_reads_as_much() -> None:
    from carrier.memory._ranked import MemoryQuery, search_index
    from carrier.types import MemoryKind

    source = Source(clustered(300), hold=True)
    index = VectorIndex(load=source.load, count=source.count, wait_rows=100, ann_rows=10_000)
    query = source.vectors[0]

    def search(q: MemoryQuery) -> asyncio.Task[list[tuple[str, float]] | None]:
        return asyncio.create_task(search_index(index, q, query.tolist(), MODEL, 3))

    # A room's messages: the store's own search reads just that room; no reason to wait.
    assert await search(MemoryQuery(AGENT, room_id="r1")) is None
    assert await search(MemoryQuery(AGENT, kinds=[MemoryKind.FACT])) is None
    # Every message: the store would read every vector, as the load does; it waits instead.
    assert MemoryQuery(AGENT, kinds=[MemoryKind.MESSAGE, MemoryKind.SUMMARY]).scans_most_rows
    waiting = search(MemoryQuery(AGENT))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    source.released.set()
    hits = await waiting
    assert hits is not None and [i for i, _ in hits] == exact_ids(source, query, 3)
    assert source.loads == {"main": 1}  # loaded once
    await index.close()


async def test_index_ann_recall_and_exact_scores_with_filters() -> None:
    source = Source(clustered(6000))
    index = VectorIndex(load=source.load, count=source.count, ann_rows=1000, wait_rows=10**6)
    await index.prepare(AGENT, MODEL, DIM)
    assert index.ann_ready(AGENT, MODEL, DIM)
    queries = clustered(40, seed=9)
    rooms = np.array(source.rooms)
    kinds = np.array(["message" if i % 2 else "fact" for i in range(len(source.ids))])
    cases = [
        (VectorFilter(), None),
        (VectorFilter(room_id="r1"), rooms == "r1"),
        (
            VectorFilter(room_id="r2", kinds=frozenset({"fact"})),
            (rooms == "r2") & (kinds == "fact"),
        ),
    ]
    for flt, keep in cases:
        found = 0
        for query in queries:
            hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=10, flt=flt)
            assert hits is not None and len(hits) == 10
            expected = exact_ids(source, query, 10, keep)
            found += len({i for i, _ in hits} & set(expected))
            for memory_id, score in hits:
                row = source.ids.index(memory_id)
                assert keep is None or keep[row]
                assert score == pytest.approx(float(source.vectors[row] @ query), abs=1e-5)
            assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        assert found / (10 * len(queries)) >= 0.9, flt

    # A filter that keeps fewer rows than an ANN pays for is answered exactly.
    narrow = VectorFilter(since_us=100, before_us=400)
    keep = (np.arange(len(source.ids)) >= 100) & (np.arange(len(source.ids)) < 400)
    hits = await index.search(agent_id=AGENT, model=MODEL, query=queries[0], k=10, flt=narrow)
    assert hits is not None and [i for i, _ in hits] == exact_ids(source, queries[0], 10, keep)
    await index.close()


async def test_index_keeps_the_ann_in_step_with_changes_during_and_after_a_build() -> None:
    source = Source(clustered(2000))
    gate = threading.Event()
    index = VectorIndex(
        load=source.load,
        count=source.count,
        ann_rows=500,
        wait_rows=10**6,
        ann_factory=lambda dim: ExactAnn(gate),
    )
    await index.prepare(AGENT, MODEL, DIM, ann=False)
    assert index.loaded(AGENT, MODEL, DIM)
    assert not index.ann_ready(AGENT, MODEL, DIM)  # the build waits at the gate
    target = -source.vectors[5]
    moved = VectorRows(["m7"], ["r0"], ["e"], ["fact"], [7], target[None, :])
    index.upsert(AGENT, MODEL, moved)  # during the build
    index.remove(["m5"], agent_id=AGENT)
    exact = await index.search(agent_id=AGENT, model=MODEL, query=target, k=1)
    assert exact == [("m7", pytest.approx(1.0))]  # exact search meanwhile sees the change
    gate.set()
    await index.prepare(AGENT, MODEL, DIM)
    assert index.ann_ready(AGENT, MODEL, DIM)

    async def top(query: np.ndarray) -> str:
        hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=1)
        assert hits is not None
        return hits[0][0]

    assert await top(target) == "m7"
    assert await top(source.vectors[5]) != "m5"
    fresh = VectorRows(["new"], ["r0"], ["e"], ["fact"], [1], (-source.vectors[9])[None, :])
    index.upsert(AGENT, MODEL, fresh)  # after the build
    assert await top(-source.vectors[9]) == "new"
    index.upsert(AGENT, "other:32", fresh)  # its vector now belongs to another model
    assert await top(-source.vectors[9]) != "new"
    index.remove_matching(AGENT, VectorFilter(room_id="r0"))
    hits = await index.search(agent_id=AGENT, model=MODEL, query=target, k=50)
    assert hits is not None and all(source.rooms[source.ids.index(i)] != "r0" for i, _ in hits)
    await index.close()


def small_saved_index(source: Source, directory: Path, **options: Any) -> VectorIndex:
    """An index that builds (and saves) an ANN graph from 500 rows and waits for any load."""
    return VectorIndex(
        load=source.load,
        count=source.count,
        ann_rows=500,
        persist_rows=500,
        wait_rows=10**6,
        directory=directory,
        **options,
    )


async def test_index_keeps_knowledge_in_a_set_of_its_own(tmp_path: Path) -> None:
    kinds = ["knowledge" if i % 4 == 0 else "message" for i in range(4000)]
    source = Source(clustered(4000), kinds=kinds)
    directory = tmp_path / "vectors"
    index = small_saved_index(source, directory)
    query = clustered(1, seed=5)[0]
    is_knowledge = np.array([kind == "knowledge" for kind in kinds])

    # A knowledge search loads and reads the knowledge set alone.
    knowledge = VectorFilter(kinds=frozenset({"knowledge"}))
    hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=10, flt=knowledge)
    assert source.loads == {"knowledge": 1}
    assert hits is not None and [i for i, _ in hits] == exact_ids(source, query, 10, is_knowledge)

    # Every other search reads the main set, which holds every kind.
    await index.prepare(AGENT, MODEL, DIM)
    assert index.ann_ready(AGENT, MODEL, DIM) and index.ann_ready(AGENT, MODEL, DIM, "knowledge")
    assert {s["set"]: s["rows"] for s in index.stats()} == {"main": 4000, "knowledge": 1000}
    hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=10)
    assert hits is not None and [i for i, _ in hits] == exact_ids(source, query, 10)
    messages = VectorFilter(kinds=frozenset({"message"}))
    hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=10, flt=messages)
    assert hits is not None and [i for i, _ in hits] == exact_ids(source, query, 10, ~is_knowledge)

    # A memory whose kind changes joins (or leaves) the knowledge set.
    moved = VectorRows(["m1"], ["r0"], ["e"], ["knowledge"], [1], query[None, :])
    index.upsert(AGENT, MODEL, moved)
    hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=1, flt=knowledge)
    assert hits == [("m1", pytest.approx(1.0))]
    hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=5, flt=messages)
    assert hits is not None and "m1" not in {i for i, _ in hits}

    # A memory another process wrote after the knowledge set loaded, which the main set then
    # loaded: not held until the knowledge set has it too (a store polling for other processes'
    # writes reads it whole and upserts it).
    fresh = VectorIndex(load=source.load, count=source.count, wait_rows=10**6)
    await fresh.search(agent_id=AGENT, model=MODEL, query=query, k=1, flt=knowledge)
    source.ids.append("theirs")
    source.rooms.append("r0")
    source.kinds.append("knowledge")
    source.vectors = np.concatenate([source.vectors, -query[None, :]])
    await fresh.search(agent_id=AGENT, model=MODEL, query=query, k=1, flt=messages)
    assert fresh.loaded(AGENT, MODEL, DIM) and not fresh.holds(AGENT, "theirs")
    assert fresh.holds(AGENT, "m0") and not fresh.holds(AGENT, "nobody")
    fresh.upsert(AGENT, MODEL, source.rows(4000, 4001))
    assert fresh.holds(AGENT, "theirs")
    hits = await fresh.search(agent_id=AGENT, model=MODEL, query=-query, k=1, flt=knowledge)
    assert hits is not None and hits[0][0] == "theirs"
    await fresh.close()

    # Each set is saved in a folder of its own; deleting the agent removes both, even a set
    # this process never loaded.
    await index.close()
    model_dir = directory / "m_32-32"
    assert sorted(p.name for p in model_dir.iterdir()) == ["agent", "agent~knowledge"]
    assert list((model_dir / "agent~knowledge").glob("*.rows.npz"))
    later = VectorIndex(load=source.load, count=source.count, directory=directory)
    await later.search(agent_id=AGENT, model=MODEL, query=query, k=1, flt=messages)
    later.drop_agent(AGENT)
    assert list(model_dir.iterdir()) == []
    await later.close()


async def test_index_adds_changed_rows_to_the_graph_in_batches(tmp_path: Path) -> None:
    source = Source(clustered(2000))
    index = small_saved_index(source, tmp_path, apply_rows=8)
    await index.prepare(AGENT, MODEL, DIM)
    entry = index._entries[(AGENT, MODEL, DIM, "")]
    assert entry.ann is not None
    graph = len(entry.ann)
    extra = clustered(20, seed=11)

    def row(i: int) -> VectorRows:
        return VectorRows([f"x{i}"], ["r0"], ["e"], ["fact"], [i], extra[i : i + 1])

    async def top(query: np.ndarray) -> str:
        hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=1)
        assert hits is not None
        return hits[0][0]

    # Fewer changes than a batch: not in the graph yet, searched exactly beside it.
    for i in range(7):
        index.upsert(AGENT, MODEL, row(i))
        assert await top(extra[i]) == f"x{i}"
    index.remove(["x3"], agent_id=AGENT)
    assert await top(extra[3]) != "x3"
    assert len(entry.ann) == graph
    # The eighth change fills the batch: the graph takes them all (but the removed one).
    index.upsert(AGENT, MODEL, row(7))
    assert len(entry.ann) == graph + 7 and not entry.pending
    assert await top(extra[7]) == "x7"
    # A row in the graph and changed again is held beside it too: found once.
    index.upsert(AGENT, MODEL, row(0))
    assert entry.pending
    hits = await index.search(agent_id=AGENT, model=MODEL, query=extra[0], k=5)
    assert hits is not None and hits[0][0] == "x0"
    assert len({memory_id for memory_id, _ in hits}) == len(hits) == 5
    # A save brings the pending rows into the graph first: the file holds every live row.
    index.upsert(AGENT, MODEL, row(8))
    await index.close()
    [manifest] = (tmp_path / "m_32-32" / "agent").glob("*.rows.npz")
    saved = USearchIndex.restore(
        manifest.with_name(manifest.name.replace(".rows.npz", ".usearch")), DIM
    )
    assert saved is not None and len(saved) == graph + 8


def saved_rows(folder: Path) -> list[int]:
    """How many rows each save in ``folder`` covers (from its manifest)."""
    rows = []
    for manifest in sorted(folder.glob("*.rows.npz")):
        with np.load(manifest) as data:
            rows.append(int(data["rows"]))
    return rows


async def test_index_is_saved_and_reloaded_then_patched_to_the_rows_as_loaded(
    tmp_path: Path,
) -> None:
    source = Source(clustered(3000))
    built: list[int] = []
    folder = tmp_path / "vectors" / "m_32-32" / "agent"

    def factory(dim: int) -> AnnIndex | None:
        built.append(dim)
        return default_ann(dim)

    def new_index() -> VectorIndex:
        return VectorIndex(
            load=source.load,
            count=source.count,
            directory=tmp_path / "vectors",
            ann_rows=1000,
            persist_rows=1000,
            wait_rows=10**6,
            ann_factory=factory,
        )

    async def top(index: VectorIndex, query: np.ndarray) -> str:
        hits = await index.search(agent_id=AGENT, model=MODEL, query=query, k=1)
        assert hits is not None and hits
        return hits[0][0]

    first = new_index()
    await first.prepare(AGENT, MODEL, DIM)
    await first.close()
    assert saved_rows(folder) == [3000] and len(list(folder.glob("*.usearch"))) == 1
    assert built == [DIM]

    second = new_index()
    await second.prepare(AGENT, MODEL, DIM)
    assert second.ann_ready(AGENT, MODEL, DIM)
    assert built == [DIM]  # reloaded, not rebuilt
    assert await top(second, source.vectors[3]) == "m3"
    await second.close()

    # Since the save (another process wrote, or this one crashed): memories came in another
    # order than this process saw them (the load orders them as the store does), one was
    # deleted, one re-embedded, 500 are new. The saved index is patched, not rebuilt.
    order = np.random.default_rng(3).permutation(3000)
    moved = Source(source.vectors[order])
    moved.ids = [source.ids[i] for i in order]
    moved.rooms = [source.rooms[i] for i in order]
    gone = moved.ids.index("m7")
    del moved.ids[gone], moved.rooms[gone]
    moved.vectors = np.delete(moved.vectors, gone, axis=0)
    moved.vectors[moved.ids.index("m9")] = -source.vectors[9]
    extra = clustered(500, seed=5)
    moved.vectors = np.concatenate([moved.vectors, extra])
    moved.ids += [f"n{i}" for i in range(500)]
    moved.rooms += ["r0"] * 500
    source.vectors, source.ids, source.rooms = moved.vectors, moved.ids, moved.rooms
    third = new_index()
    await third.prepare(AGENT, MODEL, DIM)
    assert built == [DIM]  # patched, not rebuilt
    assert await top(third, source.vectors[moved.ids.index("m3")]) == "m3"  # renamed right
    assert await top(third, extra[123]) == "n123"  # added
    assert await top(third, -source.vectors[moved.ids.index("m9")]) != "m9"  # old vector out
    assert await top(third, source.vectors[moved.ids.index("m9")]) == "m9"  # new one in
    hits = await third.search(agent_id=AGENT, model=MODEL, query=clustered(1, 7)[0], k=3000)
    assert hits is not None and "m7" not in {i for i, _ in hits}
    # Each key of the graph holds the vector of the memory in that row now.
    entry = third._entries[(AGENT, MODEL, DIM, "")]
    assert entry.ann is not None and entry.vectors is not None
    rows = entry.vectors.live_rows()
    stored = np.asarray(entry.ann._index.get(rows.astype(np.uint64)), dtype=np.float32)  # type: ignore[attr-defined]
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    assert np.sum(stored * entry.vectors.vectors()[rows], axis=1).min() > 0.99
    await third.close()
    assert saved_rows(folder) == [3499]  # saved again, patched

    # Too little of it left: rebuilt.
    source.vectors = -source.vectors
    fourth = new_index()
    await fourth.prepare(AGENT, MODEL, DIM)
    assert built == [DIM, DIM]
    fourth.drop_agent(AGENT)
    assert not list((tmp_path / "vectors").rglob("*.usearch"))
    await fourth.close()


class GatedSave:
    """Wraps an ANN index; its save waits for a gate and fails the test if the graph changes
    meanwhile (the graph is not safe to change while it is being written)."""

    def __init__(self, inner: AnnIndex) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.saving = threading.Event()
        self.changed_while_saving = False

    def __len__(self) -> int:
        return len(self.inner)

    def add(self, keys: np.ndarray, vectors: np.ndarray, **options: object) -> None:
        self.changed_while_saving |= self.saving.is_set()
        self.inner.add(keys, vectors, **options)  # type: ignore[call-arg]

    def remove(self, keys: np.ndarray) -> None:
        self.changed_while_saving |= self.saving.is_set()
        self.inner.remove(keys)

    def search(self, query: np.ndarray, count: int) -> np.ndarray:
        return self.inner.search(query, count)

    def save(self, path: Path) -> None:
        self.saving.set()
        self.gate.wait(timeout=30)
        self.inner.save(path)
        self.saving.clear()

    @property
    def memory_bytes(self) -> int:
        return self.inner.memory_bytes


def gated_index(
    tmp_path: Path, source: Source, *, gate_open: bool, **options: float
) -> tuple[VectorIndex, list[GatedSave]]:
    """An index saving under ``tmp_path`` whose ANN indexes (listed as made) save through a
    gate, open or closed to begin with."""
    made: list[GatedSave] = []

    def factory(dim: int) -> AnnIndex | None:
        inner = default_ann(dim)
        assert inner is not None
        made.append(GatedSave(inner))
        if gate_open:
            made[-1].gate.set()
        return made[-1]  # type: ignore[return-value]

    index = VectorIndex(
        load=source.load,
        count=source.count,
        directory=tmp_path / "vectors",
        ann_rows=500,
        persist_rows=500,
        wait_rows=10**6,
        ann_factory=factory,
        **options,  # type: ignore[arg-type]
    )
    return index, made


async def test_index_holds_changes_while_saving_and_searches_them_exactly(tmp_path: Path) -> None:
    source = Source(clustered(2000))
    index, made = gated_index(tmp_path, source, gate_open=False)
    await index.prepare(AGENT, MODEL, DIM, ann=False)
    building = asyncio.create_task(index.prepare(AGENT, MODEL, DIM))
    [ann] = made
    assert await asyncio.to_thread(ann.saving.wait, 30)  # built; now writing the file
    assert index.ann_ready(AGENT, MODEL, DIM)
    fresh = clustered(1, seed=42)
    index.upsert(AGENT, MODEL, VectorRows(["new"], ["r0"], ["e"], ["fact"], [0], fresh))
    index.remove(["m5"], agent_id=AGENT)
    hits = await index.search(agent_id=AGENT, model=MODEL, query=fresh[0], k=3)
    assert hits is not None and hits[0][0] == "new"  # held, searched exactly
    hits = await index.search(agent_id=AGENT, model=MODEL, query=source.vectors[5], k=3)
    assert hits is not None and "m5" not in {i for i, _ in hits}
    ann.gate.set()
    await building
    assert not ann.changed_while_saving
    # Added to the graph once written; the save made meanwhile is not kept (a row it covers was
    # removed while it was written), and closing saves again.
    assert ann.search(fresh[0], 1).tolist() == [2000]
    assert not list((tmp_path / "vectors").rglob("*.usearch"))
    await index.close()
    assert saved_rows(tmp_path / "vectors" / "m_32-32" / "agent") == [2001]


async def test_index_saves_again_while_running_and_keeps_a_file_written_during_appends(
    tmp_path: Path,
) -> None:
    source = Source(clustered(2000))
    # The first save goes through; every change may start another.
    index, made = gated_index(tmp_path, source, gate_open=True, save_every_s=0.0)
    folder = tmp_path / "vectors" / "m_32-32" / "agent"

    await index.prepare(AGENT, MODEL, DIM)  # loaded, built, saved
    [ann] = made
    assert saved_rows(folder) == [2000]

    # A change starts a save in the background; rows appended while it writes lie past the
    # rows the file covers, so the file is kept (a start reloads it and adds them).
    ann.gate.clear()
    extra = clustered(3, seed=11)

    def rows(ids: list[str], vectors: np.ndarray) -> VectorRows:
        n = len(ids)
        return VectorRows(ids, ["r0"] * n, ["e"] * n, ["fact"] * n, [0] * n, vectors)

    index.upsert(AGENT, MODEL, rows(["x0"], extra[:1]))
    saving = index._entries[(AGENT, MODEL, DIM, "")].saving
    assert saving is not None and await asyncio.to_thread(ann.saving.wait, 30)
    index.upsert(AGENT, MODEL, rows(["x1", "x2"], extra[1:]))
    ann.gate.set()
    await saving
    assert saved_rows(folder) == [2001] and not ann.changed_while_saving
    hits = await index.search(agent_id=AGENT, model=MODEL, query=extra[2], k=1)
    assert hits is not None and hits[0][0] == "x2"
    await index.close()  # the appended rows left it changed: saved with all of them
    assert saved_rows(folder) == [2003]
