"""SecantusDB (a MongoDB-compatible server from PyPI) on a free loopback port, for benchmarks
that need a MongoDB and no network: started as ``tests/mongo_servers.py`` starts it for the
tests (an empty config file, ``--standalone`` like a plain mongod)::

    with secantus_server(Path(tmp)) as server:   # server.uri: mongodb://127.0.0.1:<port>/
        ...                                       # server.pid: its process, to read its CPU
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.mongo_servers import secantus_process

__all__ = ["Secantus", "secantus_server"]


@dataclass(frozen=True)
class Secantus:
    uri: str
    """``mongodb://127.0.0.1:<port>/`` (no database: add one's name)."""
    pid: int


@contextlib.contextmanager
def secantus_server(root: Path) -> Iterator[Secantus]:
    """SecantusDB (a MongoDB-compatible server) on a free loopback port, as the tests start it
    (:func:`tests.mongo_servers.secantus_process`); its files go under ``root``."""
    with secantus_process(root) as (port, pid):
        yield Secantus(uri=f"mongodb://127.0.0.1:{port}/", pid=pid)
