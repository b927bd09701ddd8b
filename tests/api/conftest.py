"""Fixtures for the agent API: a real SQLite store, a hashing embedder and a function model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[2]
HARBOR = REPO / "characters" / "harbor.yaml"
ADMIN = "admin-secret-token-for-tests"

CHARACTER: dict[str, Any] = {
    "name": "Pilot",
    "bio": ["Pilot answers questions about flying."],
    "clients": [],
    "settings": {"secrets": {"OPENAI_API_KEY": "$PILOT_OPENAI_KEY"}},
    "messageExamples": [
        [
            {"user": "{{user1}}", "content": {"text": "hello"}},
            {"user": "Pilot", "content": {"text": "Cleared for takeoff!"}},
        ]
    ],
}


def xml(text: str, actions: str = "REPLY", thought: str = "thinking") -> str:
    return (
        f"<response><thought>{thought}</thought><actions>{actions}</actions>"
        f"<text>{text}</text></response>"
    )


def answer(request: ModelRequest) -> str:
    """The fake model: echoes the message in character; no facts."""
    if request.purpose == "facts":
        return "[]"
    if request.purpose == "should_respond":
        return "RESPOND"
    return xml(f"Ahoy! You said: {request.query}", thought="a private thought")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def model() -> FunctionModel:
    return FunctionModel(answer, chunk_size=5)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings({"CARRIER_DATA_DIR": str(tmp_path / "data"), "CARRIER_ADMIN_TOKEN": ADMIN})


@pytest.fixture
def api_settings() -> ApiSettings:
    return ApiSettings(rate_per_minute=6000, rate_burst=1000, token_cache_seconds=0)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(path=tmp_path / "carrier.db") as s:
        yield s


@pytest.fixture
def make_manager(store: SQLiteStore, model: FunctionModel) -> Callable[..., AgentManager]:
    def make(settings: Settings, **kw: Any) -> AgentManager:
        return AgentManager(
            store=store,
            embedder=HashEmbedder(),
            settings=settings,
            environ=kw.pop("environ", {}),
            model_factory=kw.pop("model_factory", lambda character: model),
            **kw,
        )

    return make


@pytest.fixture
async def manager(
    make_manager: Callable[..., AgentManager], settings: Settings
) -> AsyncIterator[AgentManager]:
    m = make_manager(settings)
    yield m
    await m.close()


@pytest.fixture
def make_client() -> Callable[..., httpx.AsyncClient]:
    """An httpx client on the app in process; ``host`` is the caller's address."""

    def make(
        app: Any, *, host: str = "198.51.100.7", token: str | None = ADMIN
    ) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(host, 40000))
        headers = bearer(token) if token else {}
        return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)

    return make


@pytest.fixture
async def client(
    manager: AgentManager,
    settings: Settings,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(manager, settings, api_settings=api_settings)
    async with make_client(app) as c:
        yield c


async def create_running(client: httpx.AsyncClient, data: dict[str, Any] | None = None) -> str:
    """Create an agent from ``data`` (default: Pilot) and start it; returns its id."""
    created = await client.post("/agents", json=data or CHARACTER)
    assert created.status_code == 201, created.text
    agent_id: str = created.json()["id"]
    started = await client.post(f"/agents/{agent_id}/start")
    assert started.status_code == 200, started.text
    return agent_id
