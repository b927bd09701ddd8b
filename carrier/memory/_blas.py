"""Run numpy's matrix products on one BLAS thread (the vector index's scans, the numpy
embedding engine's forward pass), or set how many the process uses.

Scoring every row is memory-bound: a second BLAS thread gains ~10% on an idle machine, and on a
busy one (other processes, the embedding model) OpenBLAS threads wait for each other at barriers,
which made a 10k x 384 product take 12 ms instead of 1.1 ms here. threadpoolctl switches the
setting (process-wide in OpenBLAS) for the duration of a product through its BLAS libraries'
controllers, found once (~4 us a switch; ``ThreadpoolController.limit`` took ~15 us idle and
~0.13 ms inside a turn); overlapping uses are counted so the last one out restores it. Without
threadpoolctl this does nothing.

OpenBLAS (0.3.31 here) ignores a switch made while another thread that has run BLAS products is
alive: the numpy embedding engine's worker thread is one, so that engine sets the process's
count once, at load (:func:`set_blas_threads`), to its serving threads (one by default).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy  # noqa: F401 - loads the BLAS library before threadpoolctl looks for it

__all__ = ["one_blas_thread", "set_blas_threads"]

_lock = threading.Lock()
_users = 0
_saved: list[int] = []
"""Each BLAS library's thread count before the first of the overlapping uses."""
_libraries: list[Any] | None = None
"""threadpoolctl's controllers of the BLAS libraries loaded at first use, numpy's among them
(empty: threadpoolctl missing). One loaded later (scipy's) does not run numpy's products."""


def _blas_libraries() -> list[Any]:
    global _libraries
    if _libraries is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _libraries = []
        else:
            _libraries = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _libraries


@contextmanager
def one_blas_thread() -> Iterator[None]:
    global _users, _saved
    with _lock:
        libraries = _blas_libraries()
        if libraries:
            if _users == 0:
                _saved = [lib.num_threads for lib in libraries]
                for lib, threads in zip(libraries, _saved, strict=True):
                    if threads != 1:  # (the numpy engine's process is at one already)
                        lib.set_num_threads(1)
            _users += 1
    try:
        yield
    finally:
        if libraries:
            with _lock:
                _users -= 1
                if _users == 0:
                    for lib, threads in zip(libraries, _saved, strict=True):
                        if threads != 1:
                            lib.set_num_threads(threads)


def set_blas_threads(threads: int) -> None:
    """Set the BLAS libraries' thread count for the process (what :func:`one_blas_thread`
    restores to after each use)."""
    global _saved
    with _lock:
        libraries = _blas_libraries()
        if _users:
            _saved = [threads for _ in libraries]
        else:
            for lib in libraries:
                lib.set_num_threads(threads)
