"""The world of the conversation tests: the fake Graph API, an agent with its Instagram client
(a FunctionModel), a job service on SQLite, the audit log, and the real API server (uvicorn)
the fake delivers its webhooks to."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet

from carrier.agents import AgentManager
from carrier.api import ApiSettings
from carrier.api.server import api_server
from carrier.audit.base import AuditLog
from carrier.audit.host import open_host_audit
from carrier.character import Character
from carrier.jobs import Job, JobService, SQLiteJobStore
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings
from carrier.types import Memory, MemoryKind
from clients.instagram import InstagramClient, parse_config
from clients.instagram.config import InstagrapiSettings
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.fake.private import FakeInstagram
from clients.instagram.graph import GraphPublisher
from clients.instagram.inbound.webhook import APP_SECRET_ENV, INBOUND_JOB_KIND, VERIFY_TOKEN_ENV
from clients.instagram.jobs import register_instagram_jobs
from clients.instagram.private import InstagrapiPublisher

FERNET_KEY = Fernet.generate_key()
APP_SECRET = "meta-app-secret-for-the-tests"
VERIFY_TOKEN = "verify-token-for-the-tests"
ADMIN = "admin-token-for-the-conversation-tests"
COMMENT_VOICE = "film stock first, then one short lowercase line"
COMMENT_REPLY = "portra 400, shot at box speed. the fog did the rest."
DM_REPLY = "hey! thanks for writing. the prints ship on friday."


def answer(request: ModelRequest) -> str:
    """The fake model: the comment voice when the prompt carries style.comment, else the chat one."""
    if request.purpose == "facts":
        return "[]"
    if request.purpose == "should_respond":
        return "RESPOND"
    system = str(request.messages[0].content)
    if system.startswith("You moderate"):  # moderation's model rule: a score
        return "0.95" if "scam" in (request.query or "") else "0.05"
    text = COMMENT_REPLY if COMMENT_VOICE in system else DM_REPLY
    return f"<response><thought>t</thought><actions>REPLY</actions><text>{text}</text></response>"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class World:
    manager: AgentManager
    service: JobService
    graph: FakeGraphAPI
    store: SQLiteStore
    agent_id: str
    url: str
    http: httpx.AsyncClient
    audit: AuditLog
    private: FakeInstagram | None = None
    """The instagrapi backend's world, when the agent publishes through instagrapi."""

    @property
    def jobs(self) -> SQLiteJobStore:
        assert isinstance(self.service.store, SQLiteJobStore)
        return self.service.store

    async def inbound_jobs(self) -> list[Job]:
        return await self.jobs.list_jobs(kind=INBOUND_JOB_KIND, limit=None)

    async def memories(self) -> list[Memory]:
        return await self.store.get_memories(
            agent_id=self.agent_id, kinds=[MemoryKind.MESSAGE], limit=100
        )


@pytest.fixture
async def make_world(
    tmp_path: Path,
    store: SQLiteStore,
    make_publisher: Callable[..., GraphPublisher],
    fake_graph: FakeGraphAPI,
) -> AsyncIterator[Callable[..., Any]]:
    async with AsyncExitStack() as stack:

        async def make(
            conversations: dict[str, Any] | None = None,
            *,
            private: FakeInstagram | None = None,
            **instagram: Any,
        ) -> World:
            """``private``: the agent answers through instagrapi against that world."""
            jobs = SQLiteJobStore(path=tmp_path / "jobs.db")
            service = JobService(store=jobs)
            await jobs.open()
            stack.push_async_callback(service.stop, grace_s=0)

            def factory(runtime: Any, config: Any, environ: Any) -> InstagramClient:
                publisher: Any = make_publisher()
                if private is not None:
                    publisher = InstagrapiPublisher(
                        username=private.username,
                        password=private.password,
                        store=runtime.store,
                        agent_id=str(runtime.character.agent_id),
                        fernet_key=FERNET_KEY,
                        settings=InstagrapiSettings(delay_range=(0.0, 0.001)),
                        client_factory=private.client_factory,
                    )
                return InstagramClient(
                    runtime=runtime,
                    config=parse_config(config),
                    environ=environ,
                    publisher=publisher,
                )

            settings = load_settings(
                {"CARRIER_DATA_DIR": str(tmp_path / "data"), "CARRIER_ADMIN_TOKEN": ADMIN}
            )
            model = FunctionModel(answer)
            manager = AgentManager(
                store=store,
                embedder=HashEmbedder(),
                settings=settings,
                environ={APP_SECRET_ENV: APP_SECRET, VERIFY_TOKEN_ENV: VERIFY_TOKEN},
                model_factory=lambda c: model,
                client_factories={"instagram": factory},
            )
            host_audit = await open_host_audit(settings, manager.services)
            stack.push_async_callback(host_audit.aclose)  # after the manager's close (LIFO)
            stack.push_async_callback(manager.close)
            register_instagram_jobs(service, manager)
            character = {
                "name": "Lumen",
                "bio": ["Lumen shoots film and travels slowly."],
                "style": {"chat": ["warm and brief"], "comment": [COMMENT_VOICE]},
                "clients": ["instagram"],
                "clientConfig": {
                    "instagram": {
                        "publisher": "graph" if private is None else "instagrapi",
                        "igUserId": fake_graph.ig_user_id,
                        "conversations": conversations or {},
                        **instagram,
                    }
                },
            }
            record = await manager.create(Character.model_validate(character))
            status = await manager.start(record.id)
            assert status.clients == ["instagram"], status.skipped
            url = await stack.enter_async_context(
                api_server(
                    manager,
                    settings,
                    port=free_port(),
                    api_settings=ApiSettings(rate_per_minute=6000, rate_burst=1000),
                )
            )
            http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
            fake_graph.webhooks.url = f"{url}/webhooks/instagram"
            fake_graph.webhooks.verify_token = VERIFY_TOKEN
            fake_graph.webhooks.app_secret = APP_SECRET  # the Meta app's, as the receiver has it
            return World(
                manager, service, fake_graph, store, record.id, url, http, host_audit.log, private
            )

        yield make
