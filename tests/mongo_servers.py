"""The MongoDB servers the whole suite shares: SecantusDB (a MongoDB-compatible server from PyPI)
started once per session on a free loopback port, the same server behind a loopback proxy that
adds Atlas Vector Search (:mod:`tests.memory.atlas_search`), and a real MongoDB when
``CARRIER_TEST_MONGODB_URI`` is set.

The fixtures are defined here once and made visible to every test by ``tests/conftest.py``: a
conftest that imported them again would start a second server of its own (pytest keeps one
instance per definition), and its teardown could pull a server from under another's proxy.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

__all__ = [
    "TEST_MONGODB_URI_ENV",
    "MongoServer",
    "ProxiedMongoServer",
    "mongo_compatible_server",
    "mongo_real_server",
    "mongo_vector_search_proxy",
    "mongo_vector_search_server",
    "secantus_process",
]

TEST_MONGODB_URI_ENV = "CARRIER_TEST_MONGODB_URI"
SERVER_START_TIMEOUT_S = 30.0


class MongoServer:
    """A MongoDB (or compatible) server the tests use, with a sync client for checks."""

    def __init__(self, uri: str) -> None:
        from pymongo import MongoClient

        self.uri = uri
        # Bounded: a server that stops answering fails a check (or a close) instead of hanging.
        self.client: Any = MongoClient(
            uri, serverSelectionTimeoutMS=10_000, socketTimeoutMS=60_000, connectTimeoutMS=10_000
        )

    def database_uri(self, database: str) -> str:
        """The server's URI naming ``database``; credentials still authenticate where they did."""
        parts = urlsplit(self.uri)
        query = parts.query
        if "@" in parts.netloc and "authsource=" not in query.lower():
            auth_db = parts.path.strip("/") or "admin"
            query = f"{query}&authSource={auth_db}" if query else f"authSource={auth_db}"
        return urlunsplit(parts._replace(path=f"/{database}", query=query))

    def close(self) -> None:
        """Close the client, waiting 5 s at most: closing ends the client's server sessions, and
        a server that no longer answers (one busy with a whole suite's databases, a proxy already
        stopping) would hold the suite's teardown for the socket timeout, a minute."""
        closing = threading.Thread(target=self.client.close, name="mongo-test-close", daemon=True)
        closing.start()
        closing.join(5)

    @contextmanager
    def fresh_database(self) -> Iterator[str]:
        """A new database name on the server; the database is dropped afterwards."""
        name = f"carrier_test_{uuid.uuid4().hex[:16]}"
        try:
            yield name
        finally:
            self.client.drop_database(name)


def _free_loopback_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"SecantusDB exited with {process.returncode} on start:\n{log.read_text()[-2000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"SecantusDB did not listen on port {port} in {SERVER_START_TIMEOUT_S} s")


@contextmanager
def secantus_process(root: Path, *, standalone: bool = True) -> Iterator[tuple[int, int]]:
    """SecantusDB on a free loopback port, its files under ``root``; yields ``(port, pid)`` and
    stops it after. ``standalone`` like a plain mongod (the mongo:7 of docker/compose.yaml);
    without it, a single-node replica set that serves change streams."""
    config = root / "secantusd.toml"  # an empty config: no secantusd.toml from $HOME or /etc
    config.write_text("")
    log = root / "server.log"
    for _attempt in range(3):  # another process may take the free port before the server does
        port = _free_loopback_port()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "secantus",
                    "--config", str(config),
                    "--host", "127.0.0.1",
                    "--port", str(port),
                    "--storage-path", str(root / "data"),
                    "--log-level", "WARNING",
                    *(["--standalone"] if standalone else []),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=root,
            )  # fmt: skip
        try:
            _wait_for_port(port, process, log)
            break
        except RuntimeError:
            process.kill()
            process.wait()
            if "in use" not in log.read_text():
                raise
    else:
        raise RuntimeError(f"SecantusDB found no free port:\n{log.read_text()[-2000:]}")
    try:
        yield port, process.pid
    finally:
        # Killed, not terminated: its files are thrown away, and a clean shutdown of a server
        # that holds a whole suite's databases can take most of a minute on a loaded machine.
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def mongo_compatible_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MongoServer]:
    """SecantusDB (a MongoDB-compatible server on WiredTiger) on a free loopback port."""
    if importlib.util.find_spec("secantus") is None or importlib.util.find_spec("pymongo") is None:
        pytest.skip(
            "SecantusDB or pymongo is not installed, so the MongoDB store is not tested against "
            "a compatible server; make install-dev installs both"
        )
    root = tmp_path_factory.mktemp("secantus")
    with secantus_process(root) as (port, _pid):
        server = MongoServer(f"mongodb://127.0.0.1:{port}/")
        try:
            yield server
        finally:
            server.close()


@pytest.fixture(scope="session")
def mongo_vector_search_proxy(mongo_compatible_server: MongoServer) -> Iterator[Any]:
    """Atlas Vector Search (:mod:`tests.memory.atlas_search`) in front of SecantusDB."""
    from tests.memory.atlas_search import VectorSearchProxy

    host, port = mongo_compatible_server.client.address
    proxy = VectorSearchProxy((host, port))
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


class ProxiedMongoServer(MongoServer):
    """SecantusDB behind the vector search proxy: a MongoDB server with ``$vectorSearch``."""

    def __init__(self, proxy: Any) -> None:
        super().__init__(proxy.uri)
        self.proxy = proxy


@pytest.fixture(scope="session")
def mongo_vector_search_server(mongo_vector_search_proxy: Any) -> Iterator[ProxiedMongoServer]:
    server = ProxiedMongoServer(mongo_vector_search_proxy)
    yield server
    server.close()


@pytest.fixture(scope="session")
def mongo_real_server() -> Iterator[MongoServer]:
    """The real MongoDB named by ``CARRIER_TEST_MONGODB_URI``."""
    uri = os.environ.get(TEST_MONGODB_URI_ENV)
    if not uri:
        pytest.skip(f"set {TEST_MONGODB_URI_ENV} to test against a real MongoDB")
    server = MongoServer(uri)
    yield server
    server.close()
