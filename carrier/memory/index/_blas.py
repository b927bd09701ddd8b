"""Run numpy's matrix-vector products on one BLAS thread.

Scoring every row is memory-bound: a second BLAS thread gains ~10% on an idle machine, and on a
busy one (other processes, the embedding model) OpenBLAS threads wait for each other at barriers,
which made a 10k x 384 product take 12 ms instead of 1.1 ms here. threadpoolctl switches the
setting (process-wide in OpenBLAS) for the duration of a product, ~15 us a switch; overlapping
uses are counted so the last one out restores it. Without threadpoolctl this does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["one_blas_thread"]

_lock = threading.Lock()
_users = 0
_limit: Any = None
_controller: Any = None
_unavailable = False


def _get_controller() -> Any:
    global _controller, _unavailable
    if _controller is None and not _unavailable:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _unavailable = True
            return None
        _controller = ThreadpoolController()
    return _controller


@contextmanager
def one_blas_thread() -> Iterator[None]:
    global _users, _limit
    with _lock:
        controller = _get_controller()
        if controller is not None:
            if _users == 0:
                _limit = controller.limit(limits=1, user_api="blas")
            _users += 1
    try:
        yield
    finally:
        if controller is not None:
            with _lock:
                _users -= 1
                if _users == 0 and _limit is not None:
                    _limit.restore_original_limits()
                    _limit = None
