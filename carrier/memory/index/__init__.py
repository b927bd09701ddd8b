"""Vector search in process: exact over in-memory float32 rows, ANN for large sets.

:class:`VectorIndex` is what the stores use; :class:`VectorSet` holds one agent's vectors of one
model; :mod:`carrier.memory.index.ann` wraps the ANN library.
"""

from __future__ import annotations

from carrier.memory.index.manager import Shard, VectorIndex
from carrier.memory.index.rows import VectorFilter, VectorRows, VectorSet

__all__ = ["Shard", "VectorFilter", "VectorIndex", "VectorRows", "VectorSet"]
