"""Real loopback servers for the Instagram tests: an aioftp server whose root the fake Graph API
serves over HTTP, a SQLite store, a manual clock whose sleeps advance time instantly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import aioftp
import pytest

from carrier.memory.sqlite import SQLiteStore
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.ftp import FtpMediaHost
from clients.instagram.graph import GraphAPI, GraphPublisher
from clients.instagram.post import PublishStates
from clients.instagram.quota import PublishCounter
from tests.clients.instagram._conversation_world import make_world  # noqa: F401  (a fixture)
from tests.clients.instagram.helpers import FTP_PASSWORD, FTP_USER, TOKEN, ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def ftp_root(tmp_path: Path) -> Path:
    root = tmp_path / "ftp-root"
    (root / "media").mkdir(parents=True)
    return root


@pytest.fixture
async def ftp_server(ftp_root: Path) -> AsyncIterator[tuple[str, int]]:
    server = aioftp.Server([aioftp.User(FTP_USER, FTP_PASSWORD, base_path=ftp_root)])
    await server.start("127.0.0.1", 0)
    try:
        yield "127.0.0.1", server.address[1]
    finally:
        await server.close()


@pytest.fixture
def fake_graph(ftp_root: Path) -> Iterator[FakeGraphAPI]:
    with FakeGraphAPI(token=TOKEN, static_root=ftp_root / "media") as fake:
        yield fake


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(path=tmp_path / "carrier.db") as s:
        yield s


@pytest.fixture
def states(store: SQLiteStore) -> PublishStates:
    return PublishStates(store, "agent-lumen")


@pytest.fixture
def make_publisher(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI, store: SQLiteStore, clock: ManualClock
) -> Callable[..., GraphPublisher]:
    """A fresh GraphPublisher each call, as a restarted process would build it."""

    def make(
        *, limit: int = 50, delete_after_publish: bool = True, **kwargs: object
    ) -> GraphPublisher:
        host, port = ftp_server
        api = GraphAPI(
            access_token=TOKEN, ig_user_id=fake_graph.ig_user_id, base_url=fake_graph.url
        )
        media_host = FtpMediaHost(
            host=host,
            port=port,
            user=FTP_USER,
            password=FTP_PASSWORD,
            directory="/media",
            base_url=fake_graph.media_url,
            sleep=clock.sleep,
        )
        counter = PublishCounter(store, "instagram:agent-lumen:published", limit=limit, clock=clock)
        return GraphPublisher(
            api=api,
            host=media_host,
            counter=counter,
            delete_after_publish=delete_after_publish,
            clock=clock,
            sleep=clock.sleep,
            **kwargs,  # type: ignore[arg-type]
        )

    return make
