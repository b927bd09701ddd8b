"""Exact vector search and the float32 blob format vectors are stored in.

:func:`cosine_top_k` is the reference every faster index is measured against: it scores every
row, so its answer is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["cosine_top_k", "from_blob", "from_blobs", "to_blob"]

_FLOAT32_LE = np.dtype("<f4")
"""The stored format: little-endian float32, whatever the machine's byte order."""


def to_blob(vector: Sequence[float] | np.ndarray) -> bytes:
    """A 1-d vector as little-endian float32 bytes (4 bytes per dimension)."""
    array = np.asarray(vector, dtype=_FLOAT32_LE)
    if array.ndim != 1:
        raise ValueError(f"expected a 1-d vector, got shape {array.shape}")
    return array.tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    """The vector stored by :func:`to_blob`, as a native float32 array."""
    if len(blob) % 4:
        raise ValueError(f"a float32 blob has a length divisible by 4, got {len(blob)} bytes")
    return np.frombuffer(blob, dtype=_FLOAT32_LE).astype(np.float32)  # a writable copy


def from_blobs(blobs: Iterable[bytes], dim: int) -> np.ndarray:
    """Stack blobs of ``dim`` dimensions each into a read-only ``(n, dim)`` float32 matrix."""
    joined = b"".join(blobs)
    if len(joined) % (4 * dim):
        raise ValueError(f"blobs do not hold whole {dim}-dimension float32 vectors")
    # No copy on little-endian machines (nearly all): the matrix is a view of the joined bytes.
    return np.frombuffer(joined, dtype=_FLOAT32_LE).reshape(-1, dim).astype(np.float32, copy=False)


def cosine_top_k(
    query: np.ndarray | Sequence[float], matrix: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Indices and cosine scores of the ``k`` rows of ``matrix`` closest to ``query``, best first.

    Neither side needs to be normalized; a zero vector scores 0 against everything. Equal scores
    among the returned rows are ordered by row index. Returns two empty arrays when ``k <= 0`` or
    the matrix has no rows.
    """
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or m.shape[1] != q.shape[0]:
        raise ValueError(f"query of shape {q.shape} does not match matrix of shape {m.shape}")
    n = m.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float32)
    q_norm = float(np.linalg.norm(q))
    if q_norm > 0:
        q = q / q_norm
    scores = m @ q
    norms = np.sqrt(np.einsum("ij,ij->i", m, m))  # no (n, dim) temporary, unlike linalg.norm
    np.divide(scores, norms, out=scores, where=norms > 0)
    scores[norms == 0] = 0.0
    candidates = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    # Stable sort of the k candidates by descending score; ties by row index.
    order = candidates[np.lexsort((candidates, -scores[candidates]))]
    return order, scores[order]
