"""Exact cosine top-k and the float32 blob format."""

from __future__ import annotations

import numpy as np
import pytest

from carrier.memory.vector import cosine_top_k, from_blob, from_blobs, to_blob


def test_vector_blob_round_trip_is_little_endian_float32() -> None:
    vector = [0.25, -1.5, 3.0]
    blob = to_blob(vector)
    assert blob == np.array(vector, dtype="<f4").tobytes()
    assert len(blob) == 12
    decoded = from_blob(blob)
    assert decoded.dtype == np.float32
    assert decoded.tolist() == vector
    decoded[0] = 9.0  # decoded arrays are writable copies


def test_vector_from_blobs_stacks_rows() -> None:
    rows = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    matrix = from_blobs((to_blob(r) for r in rows), 2)
    assert matrix.shape == (3, 2)
    assert matrix.tolist() == rows
    assert from_blobs([], 2).shape == (0, 2)


def test_vector_bad_blobs_are_rejected() -> None:
    with pytest.raises(ValueError):
        from_blob(b"abc")
    with pytest.raises(ValueError):
        from_blobs([to_blob([1.0, 2.0, 3.0])], 2)
    with pytest.raises(ValueError):
        to_blob(np.zeros((2, 2)))


def test_vector_top_k_is_best_first_and_matches_a_full_sort() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(500, 16)).astype(np.float32)
    query = rng.normal(size=16)
    indices, scores = cosine_top_k(query, matrix, 10)

    cosines = (matrix @ query) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    expected = np.argsort(-cosines)[:10]
    assert indices.tolist() == expected.tolist()
    assert scores == pytest.approx(cosines[expected], abs=1e-5)
    assert list(scores) == sorted(scores, reverse=True)


def test_vector_top_k_edges() -> None:
    matrix = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [-2.0, 0.0]], dtype=np.float32)
    indices, scores = cosine_top_k(np.array([3.0, 0.0]), matrix, 10)  # k > n: everything
    assert indices.tolist() == [0, 2, 1, 3]  # ties by row index; the zero row scores 0
    assert scores.tolist() == pytest.approx([1.0, 1.0, 0.0, -1.0])

    empty_i, empty_s = cosine_top_k([1.0, 0.0], matrix, 0)
    assert empty_i.size == empty_s.size == 0
    assert cosine_top_k([1.0, 0.0], np.zeros((0, 2), dtype=np.float32), 5)[0].size == 0
    _, zero_query = cosine_top_k([0.0, 0.0], matrix, 2)
    assert zero_query.tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="does not match"):
        cosine_top_k([1.0, 0.0, 0.0], matrix, 1)
