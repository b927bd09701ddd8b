"""Recall benchmark: top-10 latency of exact and ANN search, recall@10 of ANN against exact, build
time and memory, at 10k / 100k / 1M memories of real text embedded by the real model.

    .venv/bin/python bench/recall.py --sizes 10000,100000
    .venv/bin/python bench/recall.py --sizes 1000000 --synthetic     # see below
    .venv/bin/python bench/recall.py --sizes 100000 --libs usearch-i8,usearch-f16,hnswlib,faiss
    .venv/bin/python bench/recall.py --sizes 100000 --store           # through SQLiteStore

Texts and vectors come from ``bench/_recall_corpus.py`` (real sentences from installed packages'
documentation, embedded by all-MiniLM-L6-v2 once and cached under ``bench/.cache/recall/``).
Embedding takes a while (~100 texts/s on two idle cores, far less on busy ones); ``--embed-only``
fills the cache. With ``--synthetic``, a size larger than the cached real vectors is completed with
SYNTHETIC vectors (a random mix of two real vectors plus a little noise, renormalized): the output
says how many rows are real.

What is timed is the product's code: :class:`~carrier.memory.index.VectorSet` (exact) and
:class:`~carrier.memory.index.VectorIndex` (ANN, its candidates re-scored exactly), searched one
query at a time on one thread, exact and ANN in alternating blocks of queries so that other load
on the machine touches both alike. ``--libs`` also times the raw libraries (no re-scoring) with the same
build settings, which is how the default was chosen.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _recall_corpus as corpus

from carrier.memory.index import Shard, VectorFilter, VectorIndex, VectorRows, VectorSet, _entry

MODEL = "all-MiniLM-L6-v2"
MODEL_ID = f"{MODEL}:384"
ROOMS = 50
KINDS = ("message",) * 7 + ("fact", "knowledge", "summary")
EVERY = Shard("every")
"""Every kind: what the exact reference searches."""
K = 10


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


async def embedder_encode() -> Callable[[list[str]], object]:
    from carrier.memory.sentence import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(cache_size=0)
    return embedder.embed


def real_cached() -> int:
    """How many real vectors are cached (whole chunks, from the start)."""
    n = 0
    while (corpus.CACHE / f"{MODEL}-{n // corpus.CHUNK:03d}.npy").exists():
        n += corpus.CHUNK
    return n


async def vectors_for(n: int, *, synthetic: bool) -> tuple[np.ndarray, int]:
    """``n`` vectors and how many of them are real."""
    real = n if not synthetic else min(n, max(real_cached(), corpus.CHUNK))
    encode = await embedder_encode() if real > real_cached() else None
    base = await corpus.vectors(real, MODEL, encode)  # type: ignore[arg-type]
    if real == n:
        return np.ascontiguousarray(base, dtype=np.float32), real
    rng = np.random.default_rng(7)
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    out[:real] = base
    for start in range(real, n, 100_000):
        m = min(100_000, n - start)
        a = rng.uniform(0.3, 0.7, size=(m, 1)).astype(np.float32)
        mixed = a * base[rng.integers(0, real, m)] + (1 - a) * base[rng.integers(0, real, m)]
        mixed += rng.normal(scale=0.02, size=mixed.shape).astype(np.float32)
        out[start : start + m] = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
    return out, real


async def query_vectors(count: int) -> np.ndarray:
    """Vectors of the first ``count`` held-out query sentences (never memories)."""
    for path in (
        corpus.CACHE / f"queries-{MODEL}.npy",
        corpus.CACHE / f"queries-{MODEL}-{count}.npy",
    ):
        if path.exists() and len(np.load(path, mmap_mode="r")) >= count:
            return np.load(path)[:count]
    encode = await embedder_encode()
    vectors = np.asarray(await encode(corpus.queries()[:count]), dtype=np.float32)  # type: ignore[misc]
    np.save(corpus.CACHE / f"queries-{MODEL}-{count}.npy", vectors)
    return vectors


def fields(n: int) -> tuple[list[str], list[str], list[str], list[str], list[int]]:
    rng = np.random.default_rng(3)
    ids = [f"m{i:07d}" for i in range(n)]
    rooms = [f"room{r}" for r in rng.integers(0, ROOMS, n)]
    kinds = [KINDS[k] for k in rng.integers(0, len(KINDS), n)]
    return ids, rooms, ["user"] * n, kinds, list(range(n))


def make_loader(
    vectors: np.ndarray, order: np.ndarray | None = None
) -> tuple[Callable[..., AsyncIterator[VectorRows]], Callable[..., object]]:
    """A store's loader over ``vectors`` (in ``order``: a permutation or subset of rows)."""
    ids, rooms, entities, kinds, created = fields(len(vectors))
    rows = np.arange(len(vectors)) if order is None else order

    def held(shard: Shard) -> np.ndarray:
        return rows[[shard.holds(kinds[i]) for i in rows.tolist()]]

    async def load(agent_id: str, model: str, dim: int, shard: Shard) -> AsyncIterator[VectorRows]:
        mine = held(shard)
        for s in range(0, len(mine), 10_000):
            part = mine[s : s + 10_000].tolist()
            yield VectorRows(
                [ids[i] for i in part],
                [rooms[i] for i in part],
                [entities[i] for i in part],
                [kinds[i] for i in part],
                [created[i] for i in part],
                vectors[part],
            )

    async def count(agent_id: str, model: str, dim: int, shard: Shard) -> int:
        return len(held(shard))

    return load, count


# -- the product path --------------------------------------------------------------------------
BLOCK = 25
"""Queries per block when exact and index searches take turns."""
SWEEP = ((40, 64), (64, 64), (64, 96), (80, 128), (100, 160))
"""(min_candidates, ef_search) pairs that ``--sweep`` tries."""


async def bench_index(
    vectors: np.ndarray,
    queries: np.ndarray,
    real: int,
    *,
    index_dir: Path | None = None,
    sweep: bool = False,
) -> None:
    n = len(vectors)
    label = "real" if real == n else f"{real} real + {n - real} SYNTHETIC (mixes of real vectors)"
    print(
        f"\n== {n} memories ({label}), {len(queries)} queries, k={K}, load {os.getloadavg()[0]:.1f}"
    )
    load, count = make_loader(vectors)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = index_dir / str(n) if index_dir is not None else Path(tmp_dir)
        index = VectorIndex(load=load, count=count, directory=Path(tmp), wait_rows=0)  # type: ignore[arg-type]
        rss0 = rss_mb()
        t = time.perf_counter()
        await index.prepare("agent", MODEL_ID, vectors.shape[1], ann=False)
        load_s = time.perf_counter() - t
        rss1 = rss_mb()
        t = time.perf_counter()
        await index.prepare("agent", MODEL_ID, vectors.shape[1])
        build_s = time.perf_counter() - t
        rss2 = rss_mb()
        sets = index.stats()
        matrices = sum(int(str(s["bytes"])) for s in sets)
        print(
            f"load into memory: {load_s:.1f} s, matrices {matrices / 2**20:.0f} MB "
            f"(RSS +{rss1 - rss0:.0f} MB); sets: "
            + ", ".join(f"{s['set']} {s['rows']} rows" for s in sets)
        )
        ann = index._entries[("agent", MODEL_ID, vectors.shape[1], "")].ann
        if any(s["ann"] for s in sets):
            graphs = sum(int(str(s["ann_bytes"])) for s in sets)
            print(
                f"ANN build ({type(ann).__name__}, {_entry.build_threads()} thread(s)): "
                f"{build_s:.1f} s for the sets of {index.ann_rows}+ rows, "
                f"{graphs / 2**20:.0f} MB (RSS +{rss2 - rss1:.0f} MB)"
            )
        else:
            print(f"no ANN index (fewer than {index.ann_rows} rows or no library)")
        # The reference: exact search over every row, whichever set holds it.
        vs = VectorSet(vectors.shape[1])
        async for page in make_loader(vectors)[0]("agent", MODEL_ID, vectors.shape[1], EVERY):
            vs.upsert(page)
        if sweep and ann is not None:
            defaults = index.breadth
            truth = [{vs.id_of(r) for r in vs.top_k(q, K)[0]} for q in queries]
            for min_candidates, ef in SWEEP:
                index.breadth = ((sys.maxsize, min_candidates, ef),)
                ms, rec = [], []
                for q, want in zip(queries, truth, strict=True):
                    t = time.perf_counter()
                    hits = await index.search(agent_id="agent", model=MODEL_ID, query=q, k=K)
                    ms.append((time.perf_counter() - t) * 1000)
                    assert hits is not None
                    rec.append(len(want & {i for i, _ in hits}) / K)
                print(
                    f"  sweep: candidates {min_candidates:3d} ef {ef:3d}: p50 {pct(ms, 50):.3f} ms "
                    f"p95 {pct(ms, 95):.3f} ms recall@10 {statistics.mean(rec):.4f}"
                )
            index.breadth = defaults

        cases: list[tuple[str, VectorFilter]] = [
            ("no filter", VectorFilter()),
            ("kinds message+summary (80%)", VectorFilter(kinds=frozenset({"message", "summary"}))),
            ("one room (2%)", VectorFilter(room_id="room7")),
            ("kind knowledge (10%)", VectorFilter(kinds=frozenset({"knowledge"}))),
        ]
        for name, flt in cases:
            mask = vs.mask(flt)
            exact_ms, ann_ms, recall = [], [], []
            # Blocks of queries, exact and index in turn: other load on the machine touches both
            # alike, while each block runs with its own data in cache (an exact scan streams the
            # whole matrix through the caches; a search right after one would start cold, which
            # is not how an agent searches).
            for start in range(0, len(queries), BLOCK):
                block = queries[start : start + BLOCK]
                expected = []
                for q in block:
                    t = time.perf_counter()
                    rows, _ = vs.top_k(q, K, mask)
                    exact_ms.append((time.perf_counter() - t) * 1000)
                    expected.append({vs.id_of(r) for r in rows})
                for q, want in zip(block, expected, strict=True):
                    t = time.perf_counter()
                    hits = await index.search(
                        agent_id="agent", model=MODEL_ID, query=q, k=K, flt=flt
                    )
                    ann_ms.append((time.perf_counter() - t) * 1000)
                    assert hits is not None
                    recall.append(len(want & {i for i, _ in hits}) / max(1, len(want)))
            print(
                f"  {name:30s} exact p50 {pct(exact_ms, 50):7.2f} ms p95 {pct(exact_ms, 95):7.2f} | "
                f"index p50 {pct(ann_ms, 50):6.3f} ms p95 {pct(ann_ms, 95):6.3f} | "
                f"recall@10 {statistics.mean(recall):.4f}"
            )
        t = time.perf_counter()
        await index.close()  # saves the ANN index
        print(f"save on close: {time.perf_counter() - t:.1f} s")
        if ann is not None and n >= index.persist_rows:
            reloaded = VectorIndex(load=load, count=count, directory=Path(tmp), wait_rows=0)  # type: ignore[arg-type]
            t = time.perf_counter()
            await reloaded.prepare("agent", MODEL_ID, vectors.shape[1])
            print(f"restart (load rows + reload saved ANN): {time.perf_counter() - t:.1f} s")
            await reloaded.close()
            # As after a crash, or beside another process: the last 10% of rows load in another
            # order than this process saw them, and 0.1% were deleted. The saved index is
            # patched (rows renamed and removed), not rebuilt.
            order = np.arange(n)
            order[-n // 10 :] = order[-n // 10 :][::-1]
            order = order[order % 1000 != 999]
            load2, count2 = make_loader(vectors, order)
            patched = VectorIndex(load=load2, count=count2, directory=Path(tmp), wait_rows=0)  # type: ignore[arg-type]
            t = time.perf_counter()
            await patched.prepare("agent", MODEL_ID, vectors.shape[1])
            took = time.perf_counter() - t
            kept = vectors[order]
            got = []
            for q in queries[:50]:
                hits = await patched.search(agent_id="agent", model=MODEL_ID, query=q, k=K)
                assert hits is not None
                want = {f"m{order[r]:07d}" for r in np.argpartition(-(kept @ q), K)[:K]}
                got.append(len(want & {i for i, _ in hits}) / K)
            print(
                f"restart after 10% reordered + 0.1% deleted (saved ANN patched): {took:.1f} s, "
                f"recall@10 {statistics.mean(got):.4f}"
            )
            await patched.close()


# -- raw libraries -----------------------------------------------------------------------------
def bench_libs(vectors: np.ndarray, queries: np.ndarray, libs: list[str]) -> None:
    n, dim = vectors.shape
    truth = [set(np.argpartition(-(vectors @ q), K)[:K].tolist()) for q in queries]
    threads = _entry.build_threads()
    print(f"  raw libraries (build threads {threads}, search 1 thread, M=16, ef_construction=128):")
    for lib in libs:
        t = time.perf_counter()
        rss0 = rss_mb()
        search: Callable[[np.ndarray, int], np.ndarray]
        if lib.startswith("usearch"):
            from usearch.index import Index

            index = Index(
                ndim=dim, metric="cos", dtype=lib.split("-")[1], connectivity=16, expansion_add=128
            )
            index.add(np.arange(n, dtype=np.uint64), vectors, threads=threads)

            def search(q: np.ndarray, ef: int, index: Index = index) -> np.ndarray:
                index._compiled.expansion_search = ef
                return np.asarray(index.search(q, K, threads=1).keys)

        elif lib == "hnswlib":
            import hnswlib

            h = hnswlib.Index(space="cosine", dim=dim)
            h.init_index(max_elements=n, M=16, ef_construction=128)
            h.set_num_threads(threads)
            h.add_items(vectors, np.arange(n))
            h.set_num_threads(1)

            def search(q: np.ndarray, ef: int, h: hnswlib.Index = h) -> np.ndarray:
                h.set_ef(max(ef, K))
                return h.knn_query(q, k=K)[0][0]

        elif lib == "faiss":
            import faiss

            faiss.omp_set_num_threads(threads)
            f: Any = faiss.IndexHNSWFlat(dim, 16, faiss.METRIC_INNER_PRODUCT)
            f.hnsw.efConstruction = 128
            f.add(vectors)
            faiss.omp_set_num_threads(1)

            def search(q: np.ndarray, ef: int, f: Any = f) -> np.ndarray:
                f.hnsw.efSearch = ef
                return f.search(q[None, :], K)[1][0]

        else:
            raise SystemExit(f"unknown library {lib}")
        build = time.perf_counter() - t
        mem = rss_mb() - rss0
        for ef in (32, 64, 128):
            ms, rec = [], []
            for q, want in zip(queries, truth, strict=True):
                t = time.perf_counter()
                got = search(q, ef)
                ms.append((time.perf_counter() - t) * 1000)
                rec.append(len(want & set(np.asarray(got).tolist())) / K)
            print(
                f"    {lib:12s} build {build:6.1f} s  RSS +{mem:5.0f} MB  ef {ef:3d}: "
                f"p50 {pct(ms, 50):.3f} ms p95 {pct(ms, 95):.3f} ms recall@10 {statistics.mean(rec):.4f}"
            )
        del search


# -- through the store -------------------------------------------------------------------------
async def bench_store(vectors: np.ndarray, queries: np.ndarray) -> None:
    from carrier.memory.sqlite import SQLiteStore
    from carrier.types import Content, Memory, MemoryKind

    n = len(vectors)
    texts = corpus.texts(n)
    ids, rooms, _, kinds, _ = fields(n)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        async with SQLiteStore(path=path, vector_index=False) as store:
            t = time.perf_counter()
            for i in range(n):
                await store.add_memory(
                    Memory(
                        id=ids[i], agent_id="agent", room_id=rooms[i], entity_id="user",
                        kind=MemoryKind(kinds[i]), content=Content(text=texts[i]),
                        embedding=vectors[i].tolist(), embedding_model=MODEL_ID,
                    )
                )  # fmt: skip
            print(f"  store: inserted {n} memories in {time.perf_counter() - t:.0f} s")
        for label, use_index in (("scan (no index)", False), ("in-memory index", True)):
            async with SQLiteStore(path=path, vector_index=use_index) as store:
                t = time.perf_counter()
                await store.prepare_search(agent_id="agent", embedding_model=MODEL_ID, dim=384)
                ready = time.perf_counter() - t
                ms = []
                for q in queries[: 20 if not use_index else len(queries)]:
                    t = time.perf_counter()
                    await store.search_memories(
                        agent_id="agent", embedding=q.tolist(), embedding_model=MODEL_ID, k=K,
                        kinds=[MemoryKind.MESSAGE, MemoryKind.SUMMARY],
                    )  # fmt: skip
                    ms.append((time.perf_counter() - t) * 1000)
                hy = []
                for q, text in zip(queries[:50], corpus.queries()[:50], strict=True):
                    t = time.perf_counter()
                    await store.search_hybrid(
                        agent_id="agent", text=text, embedding=q.tolist(),
                        embedding_model=MODEL_ID, k=K,
                    )  # fmt: skip
                    hy.append((time.perf_counter() - t) * 1000)
                print(
                    f"  store search_memories, {label:16s}: ready in {ready:5.1f} s, "
                    f"p50 {pct(ms, 50):7.2f} ms p95 {pct(ms, 95):7.2f} ms; "
                    f"search_hybrid p50 {pct(hy, 50):7.2f} ms p95 {pct(hy, 95):7.2f} ms"
                )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--libs", default="", help="e.g. usearch-i8,usearch-f16,usearch-f32,hnswlib,faiss"
    )
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help="complete sizes past the cached real vectors with labelled synthetic ones",
    )
    parser.add_argument(
        "--store", action="store_true", help="also time searches through SQLiteStore"
    )
    parser.add_argument("--embed-only", action="store_true")
    parser.add_argument("--sweep", action="store_true", help="try several ANN search settings")
    parser.add_argument("--index-dir", type=Path, help="keep saved ANN indexes here between runs")
    parser.add_argument("--build-threads", type=int, help="ANN build threads (default: cores - 1)")
    args = parser.parse_args()
    if args.build_threads:  # looked up where VectorIndex adds rows to its ANN graphs
        _entry.build_threads = lambda: args.build_threads
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()}")
    for n in sizes:
        vectors, real = await vectors_for(n, synthetic=args.synthetic)
        if args.embed_only:
            print(f"{n}: {real} real vectors cached")
            continue
        queries = await query_vectors(args.queries)
        await bench_index(vectors, queries, real, index_dir=args.index_dir, sweep=args.sweep)
        if args.libs:
            bench_libs(vectors, queries, [lib for lib in args.libs.split(",") if lib])
        if args.store:
            await bench_store(vectors, queries)


if __name__ == "__main__":
    asyncio.run(main())
