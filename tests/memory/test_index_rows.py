"""VectorSet: in-memory rows, filters and exact top-k against the reference cosine_top_k."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from carrier.memory.index.rows import VectorFilter, VectorRows, VectorSet, among
from carrier.memory.vector import cosine_top_k


def rows(ids: list[str], vectors: np.ndarray, **fields: list[object]) -> VectorRows:
    n = len(ids)
    return VectorRows(
        ids=ids,
        rooms=list(fields.get("rooms", ["r1"] * n)),  # type: ignore[arg-type]
        entities=list(fields.get("entities", ["e1"] * n)),  # type: ignore[arg-type]
        kinds=list(fields.get("kinds", ["message"] * n)),  # type: ignore[arg-type]
        created_us=list(fields.get("created", list(range(n)))),  # type: ignore[arg-type]
        vectors=vectors,
    )


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_index_rows_top_k_matches_the_reference() -> None:
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(3000, 24)).astype(np.float32)
    vs = VectorSet(24)
    vs.upsert(rows([f"m{i}" for i in range(3000)], matrix))
    query = unit(rng.normal(size=24).astype(np.float32))

    got_rows, got_scores = vs.top_k(query, 10)
    want_rows, want_scores = cosine_top_k(query, matrix, 10)
    assert got_rows.tolist() == want_rows.tolist()
    assert got_scores == pytest.approx(want_scores, abs=1e-5)
    assert [vs.id_of(r) for r in got_rows] == [f"m{r}" for r in want_rows]


def test_among_agrees_with_isin() -> None:
    rng = np.random.default_rng(3)
    for n, m, top in [(0, 5, 10), (70, 0, 100), (70, 20, 100), (300, 40, 500), (5, 500, 50)]:
        candidates = rng.choice(top, n, replace=False).astype(np.int64)  # any order
        others = list(rng.integers(0, top, m)) + list(candidates[: n // 4])  # repeats too
        assert (among(candidates, others) == np.isin(candidates, others)).all()
    assert among(np.array([7, 1, 9], dtype=np.int64), np.array([9, 7])).tolist() == [
        True,
        False,
        True,
    ]


def test_index_rows_upsert_replaces_and_does_not_touch_the_input() -> None:
    vs = VectorSet(2)
    data = np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float32)
    vs.upsert(rows(["a", "zero"], data))
    assert data.tolist() == [[3.0, 4.0], [0.0, 0.0]]  # normalized copies, not in place
    assert len(vs) == 2
    vs.upsert(rows(["a"], np.array([[0.0, -2.0]])))
    assert (len(vs), vs.size) == (2, 2)
    found, scores = vs.top_k(np.array([0.0, -1.0], dtype=np.float32), 5)
    assert [vs.id_of(r) for r in found] == ["a", "zero"]
    assert scores.tolist() == pytest.approx([1.0, 0.0])
    with pytest.raises(ValueError, match="shape"):
        vs.upsert(rows(["b"], np.zeros((1, 3))))


def test_index_rows_remove_leaves_dead_rows_out() -> None:
    vs = VectorSet(2)
    vs.upsert(rows(["a", "b", "c"], np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])))
    assert vs.remove(["b", "missing"]).tolist() == [1]
    assert (len(vs), vs.size, vs.dead) == (2, 3, 1)
    assert "b" not in vs
    found, _ = vs.top_k(np.array([1.0, 0.0], dtype=np.float32), 5)
    assert [vs.id_of(r) for r in found] == ["a", "c"]
    vs.upsert(rows(["b"], np.array([[1.0, 0.0]])))  # back, in a new row
    assert (len(vs), vs.size) == (3, 4)


def test_index_rows_filters() -> None:
    vs = VectorSet(2)
    vs.upsert(
        rows(
            ["a", "b", "c", "d"],
            np.array([[1.0, 0.0], [1.0, 0.1], [1.0, 0.2], [1.0, 0.3]]),
            rooms=["r1", "r1", "r2", "r2"],
            entities=["e1", "e2", "e1", "e2"],
            kinds=["message", "fact", "message", "fact"],
            created=[10, 20, 30, 40],
        )
    )
    q = unit(np.array([1.0, 0.0], dtype=np.float32))

    def found(**options: object) -> list[str]:
        flt = VectorFilter(**options)  # type: ignore[arg-type]
        mask = vs.mask(flt)
        top, _ = vs.top_k(q, 10, mask)
        ids = sorted(vs.id_of(r) for r in top)
        everything = np.arange(vs.size)
        assert sorted(vs.id_of(r) for r in everything[vs.matches(everything, flt)]) == ids
        return ids

    assert vs.mask(VectorFilter()) is None
    assert found() == ["a", "b", "c", "d"]
    assert found(room_id="r1") == ["a", "b"]
    assert found(entity_id="e2") == ["b", "d"]
    assert found(kinds=frozenset({"fact"})) == ["b", "d"]
    assert found(kinds=frozenset()) == []
    assert found(kinds=frozenset({"never-seen"})) == []
    assert found(room_id="nowhere") == []
    assert found(since_us=20, before_us=40) == ["b", "c"]
    assert found(exclude_ids=frozenset({"a", "zz"})) == ["b", "c", "d"]
    assert vs.remove_matching(VectorFilter(room_id="r2", kinds=frozenset({"fact"}))).tolist() == [3]
    assert found() == ["a", "b", "c"]


def test_index_rows_listed_rows_follow_changes_and_agree_with_the_full_scan() -> None:
    """A filter on a small room (entity, kind) reads that room's listed rows; after rows move
    between rooms and kinds and some are removed, it finds exactly what testing every row finds."""
    rng = np.random.default_rng(5)
    vs = VectorSet(8)
    kinds = ["message"] * 17 + ["fact", "knowledge", "summary"]

    def batch(ids: list[str]) -> VectorRows:
        return rows(
            ids,
            rng.normal(size=(len(ids), 8)),
            rooms=[f"r{i}" for i in rng.integers(0, 40, len(ids))],
            entities=[f"e{i}" for i in rng.integers(0, 60, len(ids))],
            kinds=[kinds[i] for i in rng.integers(0, len(kinds), len(ids))],
            created=rng.integers(0, 1000, len(ids)).tolist(),
        )

    vs.upsert(batch([f"m{i}" for i in range(2000)]))
    vs.upsert(batch([f"m{i}" for i in range(0, 2000, 7)]))  # new rooms, entities, kinds
    vs.upsert(batch([f"m{i}" for i in range(0, 2000, 7)]))  # ...and again (some back)
    vs.remove([f"m{i}" for i in range(0, 2000, 11)])
    vs.upsert(batch([f"n{i}" for i in range(300)]))
    filters = [
        VectorFilter(room_id="r3"),
        VectorFilter(room_id="r3", kinds=frozenset({"message"})),
        VectorFilter(entity_id="e7", since_us=500),
        VectorFilter(kinds=frozenset({"fact", "knowledge"})),
        VectorFilter(kinds=frozenset({"knowledge"}), exclude_ids=frozenset({"m14", "n3"})),
        VectorFilter(kinds=frozenset({"message"})),  # most rows: the full scan
        VectorFilter(room_id="nowhere"),
        VectorFilter(kinds=frozenset()),
    ]
    q = unit(rng.normal(size=8).astype(np.float32))
    for flt in filters:
        mask = vs.mask(flt)
        assert mask is not None
        expected = np.flatnonzero(mask)
        got = vs.rows_matching(flt)
        assert got is not None and got.tolist() == expected.tolist(), flt
        assert vs.top_k(q, 10, rows=got)[0].tolist() == vs.top_k(q, 10, mask)[0].tolist()
    assert vs.rows_matching(VectorFilter()) is None
    r3 = vs.rows_matching(VectorFilter(room_id="r3"))
    assert r3 is not None and 0 < r3.size * 8 < vs.size  # small enough to be read from its list


def test_index_rows_a_few_rows_at_a_time_end_as_a_batch_would(monkeypatch) -> None:
    """A turn's few memories are upserted row by row; the same changes made the batch way
    leave the same set: vectors, fields, counts, listed rows, searches."""
    import carrier.memory.index.rows as rows_module

    rng = np.random.default_rng(11)
    kinds = ["message", "message", "fact", "knowledge", "summary"]
    steps = []
    for step in range(400):
        ids = [f"m{i}" for i in rng.choice(120, size=int(rng.integers(1, 5)), replace=False)]
        if step % 9 == 8:
            steps.append(("remove", ids))
            continue
        vectors = rng.normal(size=(len(ids), 6))
        vectors[rng.random(len(ids)) < 0.05] = 0.0  # a zero vector stays zero
        steps.append(
            (
                "upsert",
                rows(
                    ids,
                    vectors,
                    rooms=[f"r{i}" for i in rng.integers(0, 6, len(ids))],
                    entities=[f"e{i}" for i in rng.integers(0, 9, len(ids))],
                    kinds=[kinds[i] for i in rng.integers(0, len(kinds), len(ids))],
                    created=rng.integers(0, 1000, len(ids)).tolist(),
                ),
            )
        )

    def replay(few: int) -> VectorSet:
        monkeypatch.setattr(rows_module, "_FEW_ROWS", few)
        vs = VectorSet(6)
        for what, arg in steps:
            if what == "remove":
                vs.remove(arg)  # type: ignore[arg-type]
            else:
                placed = vs.upsert(arg)  # type: ignore[arg-type]
                assert [vs.id_of(r) for r in placed.tolist()] == arg.ids  # type: ignore[union-attr]
        return vs

    one_by_one, batched = replay(4), replay(0)
    n = batched.size
    assert one_by_one.size == n and len(one_by_one) == len(batched)
    assert one_by_one.ids(n) == batched.ids(n)
    assert np.array_equal(one_by_one.vectors(), batched.vectors())
    for name in ("_live", "_room", "_entity", "_kind", "_created"):
        assert np.array_equal(getattr(one_by_one, name)[:n], getattr(batched, name)[:n]), name
    for name in ("_room_counts", "_entity_counts", "_kind_counts"):
        a, b = getattr(one_by_one, name), getattr(batched, name)
        width = max(a.size, b.size)
        assert np.array_equal(np.pad(a, (0, width - a.size)), np.pad(b, (0, width - b.size)))
    q = unit(rng.normal(size=6).astype(np.float32))
    for flt in [
        VectorFilter(room_id="r2"),
        VectorFilter(entity_id="e4", kinds=frozenset({"message", "summary"})),
        VectorFilter(kinds=frozenset({"knowledge"})),
        VectorFilter(kinds=frozenset({"fact"}), exclude_ids=frozenset({"m3"})),
    ]:
        assert one_by_one.estimate(flt) == batched.estimate(flt), flt
        found = one_by_one.rows_matching(flt)
        assert found is not None and found.tolist() == np.flatnonzero(batched.mask(flt)).tolist()
        assert (
            one_by_one.top_k(q, 5, rows=found)[0].tolist()
            == batched.top_k(q, 5, rows=found)[0].tolist()
        )


def test_index_rows_fingerprints_follow_the_vectors() -> None:
    a, b = VectorSet(2), VectorSet(2)
    a.upsert(rows(["x", "y"], np.array([[1.0, 0.0], [0.0, 1.0]])))
    b.upsert(rows(["y", "x"], np.array([[0.0, 1.0], [1.0, 0.0]])))
    assert a.ids(2) == ["x", "y"] and b.ids(2) == ["y", "x"]
    assert (a.fingerprints(np.array([0, 1])) == b.fingerprints(np.array([1, 0]))).all()
    b.upsert(rows(["y"], np.array([[1.0, 1.0]])))
    assert (a.fingerprints(np.array([1])) != b.fingerprints(np.array([0]))).any()
    b.remove(["x"])
    assert b.ids(2) == ["y", None]


def test_index_rows_estimate_counts_matches_without_a_scan() -> None:
    vs = VectorSet(2)
    vs.upsert(
        rows(
            ["a", "b", "c", "d", "a"],  # "a" twice: its last version counts
            np.array([[1.0, 0.0]] * 5),
            rooms=["r1", "r1", "r2", "r2", "r2"],
            kinds=["message", "fact", "message", "fact", "fact"],
        )
    )
    assert len(vs) == 4

    def exact(flt: VectorFilter) -> int:
        mask = vs.mask(flt)
        return len(vs) if mask is None else int(mask.sum())

    filters = [
        VectorFilter(),
        VectorFilter(room_id="r2"),
        VectorFilter(room_id="r9"),
        VectorFilter(kinds=frozenset({"fact"})),
        VectorFilter(kinds=frozenset({"fact", "message"})),
        VectorFilter(kinds=frozenset({"other"})),
        VectorFilter(since_us=1),
        VectorFilter(exclude_ids=frozenset({"b"})),
    ]
    for flt in filters:
        assert vs.estimate(flt) == exact(flt), flt
    vs.upsert(rows(["c"], np.array([[0.0, 1.0]]), rooms=["r1"], kinds=["fact"]))
    vs.remove(["d"])
    for flt in filters:
        assert vs.estimate(flt) == exact(flt), flt


def test_one_blas_thread_holds_blas_to_one_thread_until_the_last_user_leaves() -> None:
    # In a fresh process: OpenBLAS ignores a switch while another thread that ran BLAS products
    # is alive (the embedder's worker, in this test session).
    pytest.importorskip("threadpoolctl")
    script = """
import sys, threadpoolctl
from carrier.memory._blas import _blas_libraries, one_blas_thread

# numpy's BLAS (loaded first); a library loaded later (scipy's) does not run numpy's products.
numpy_blas = {lib.filepath for lib in _blas_libraries()}

def blas_threads():
    return [
        i["num_threads"] for i in threadpoolctl.threadpool_info() if i["filepath"] in numpy_blas
    ]

with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
    if not blas_threads():
        print("no BLAS")
        sys.exit(0)
    assert set(blas_threads()) == {2}
    with one_blas_thread():
        assert set(blas_threads()) == {1}
        with one_blas_thread():
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}  # the outer use is still running
    assert set(blas_threads()) == {2}
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "no BLAS":
        pytest.skip("numpy has no BLAS library threadpoolctl can control")
    assert done.stdout.strip() == "ok"
