"""VectorSet: in-memory rows, filters and exact top-k against the reference cosine_top_k."""

from __future__ import annotations

import numpy as np
import pytest

from carrier.memory.index.rows import VectorFilter, VectorRows, VectorSet
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


def test_index_rows_digest_tracks_ids_and_vectors() -> None:
    a, b = VectorSet(2), VectorSet(2)
    a.upsert(rows(["x", "y"], np.array([[1.0, 0.0], [0.0, 1.0]])))
    b.upsert(rows(["x", "y"], np.array([[1.0, 0.0], [0.0, 1.0]])))
    assert a.digest() == b.digest()
    b.upsert(rows(["y"], np.array([[1.0, 1.0]])))
    assert a.digest() != b.digest()


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
