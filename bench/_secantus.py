"""SecantusDB (a MongoDB-compatible server from PyPI) on a free loopback port, for benchmarks
that need a MongoDB and no network: started as ``tests/mongo_servers.py`` starts it for the
tests (an empty config file, ``--standalone`` like a plain mongod)::

    with secantus_server(Path(tmp)) as server:   # server.uri: mongodb://127.0.0.1:<port>/
        ...                                       # server.pid: its process, to read its CPU
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Secantus", "secantus_server"]

START_BOUND_S = 30.0


@dataclass(frozen=True)
class Secantus:
    uri: str
    """``mongodb://127.0.0.1:<port>/`` (no database: add one's name)."""
    pid: int


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def secantus_server(root: Path) -> Iterator[Secantus]:
    """SecantusDB (a MongoDB-compatible server) on a free loopback port, as
    ``tests/mongo_servers.py`` starts it for the tests; its files go under ``root``."""
    config = root / "secantusd.toml"  # empty: no secantusd.toml from $HOME or /etc
    config.write_text("")
    log = root / "server.log"
    for _attempt in range(3):  # another process may take the free port first
        port = _free_port()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "secantus",
                    "--config", str(config),
                    "--host", "127.0.0.1",
                    "--port", str(port),
                    "--storage-path", str(root / "data"),
                    "--log-level", "WARNING",
                    "--standalone",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=root,
            )  # fmt: skip
        if _listening(port, process):
            break
        process.kill()
        process.wait()
        if "in use" not in log.read_text():
            raise RuntimeError(f"SecantusDB did not start:\n{log.read_text()[-2000:]}")
    else:
        raise RuntimeError(f"SecantusDB found no free port:\n{log.read_text()[-2000:]}")
    try:
        yield Secantus(uri=f"mongodb://127.0.0.1:{port}/", pid=process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _listening(port: int, process: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + START_BOUND_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False
