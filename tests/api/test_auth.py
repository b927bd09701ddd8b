"""Auth for every route group: 401 (no or wrong token), 403 (wrong scope), 429 (rate limit);
loopback without an admin token needs the minted local token; CORS closed by default."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, check_bind, create_app
from carrier.api.ratelimit import RateLimiter
from carrier.errors import ConfigError
from carrier.settings import Settings, load_settings
from tests.api.conftest import ADMIN, CHARACTER, bearer

# (method, path, request kwargs, needs admin). {a} is the token's agent, {b} another agent.
ROUTES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("POST", "/agents", {"json": {"name": "New"}}, True),
    ("GET", "/agents", {}, True),
    ("GET", "/agents/{a}", {}, False),
    ("PUT", "/agents/{a}", {"json": {"name": "A"}}, True),
    ("DELETE", "/agents/{a}", {}, True),
    ("POST", "/agents/{a}/start", {}, True),
    ("POST", "/agents/{a}/stop", {}, True),
    ("POST", "/{a}/message", {"json": {"text": "hi"}}, False),
    ("POST", "/{a}/media", {"files": {"file": ("a.png", b"x", "image/png")}}, False),
    ("GET", "/agents/{a}/memories", {}, False),
    ("DELETE", "/agents/{a}/entities/someone/memories", {}, True),
    ("GET", "/clients/discord/config", {}, True),
    ("POST", "/clients/discord/config", {"json": {}}, True),
    ("POST", "/tokens", {"json": {"name": "t2", "agent_id": "x"}}, True),
    ("GET", "/tokens", {}, True),
    ("DELETE", "/tokens/t1", {}, True),
    ("GET", "/metrics", {}, True),
]
IDS = [f"{m} {p}" for m, p, _, _ in ROUTES]


class World:
    def __init__(self, app: Any, client: httpx.AsyncClient, a: str, b: str, token: str) -> None:
        self.app, self.client, self.a, self.b, self.token = app, client, a, b, token

    async def call(self, method: str, path: str, kwargs: dict[str, Any], **extra: Any) -> Any:
        url = path.format(a=self.a, b=self.b)
        return await self.client.request(method, url, **kwargs, **extra)


@pytest.fixture
async def world(
    manager: AgentManager,
    settings: Settings,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
) -> AsyncIterator[World]:
    app = create_app(manager, settings, api_settings=api_settings)
    async with make_client(app, token=None) as client:
        admin = bearer(ADMIN)
        a = (await client.post("/agents", json=CHARACTER, headers=admin)).json()["id"]
        b = (await client.post("/agents", json={"name": "Other"}, headers=admin)).json()["id"]
        await client.post(f"/agents/{a}/start", headers=admin)
        created = await client.post("/tokens", json={"name": "t1", "agent_id": a}, headers=admin)
        yield World(app, client, a, b, created.json()["token"])


@pytest.mark.parametrize(("method", "path", "kwargs", "admin"), ROUTES, ids=IDS)
async def test_auth_missing_token_is_401_with_challenge(
    world: World, method: str, path: str, kwargs: dict[str, Any], admin: bool
) -> None:
    response = await world.call(method, path, kwargs)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "missing bearer token" in response.json()["message"]


@pytest.mark.parametrize(("method", "path", "kwargs", "admin"), ROUTES, ids=IDS)
async def test_auth_wrong_token_is_401(
    world: World, method: str, path: str, kwargs: dict[str, Any], admin: bool
) -> None:
    for header in ("Bearer not-a-real-token", "Basic YWRtaW46YWRtaW4=", "Bearer "):
        response = await world.call(method, path, kwargs, headers={"Authorization": header})
        assert response.status_code == 401, header
        assert response.json()["error"] == "unauthorized"


@pytest.mark.parametrize(("method", "path", "kwargs", "admin"), ROUTES, ids=IDS)
async def test_auth_agent_token_scope_is_403_outside_its_agent(
    world: World, method: str, path: str, kwargs: dict[str, Any], admin: bool
) -> None:
    headers = bearer(world.token)
    own = await world.call(method, path, kwargs, headers=headers)
    if admin:
        assert own.status_code == 403
        assert "needs the admin token" in own.json()["message"]
    else:
        assert own.status_code < 400 or own.status_code == 409, own.text  # 409: no publisher
    if "{a}" in path:
        other = await world.call(method, path.replace("{a}", "{b}"), kwargs, headers=headers)
        assert other.status_code == 403
        assert own.status_code != 403 or admin


@pytest.mark.parametrize(("method", "path", "kwargs", "admin"), ROUTES, ids=IDS)
async def test_auth_rate_limit_is_429_on_every_route(
    world: World, method: str, path: str, kwargs: dict[str, Any], admin: bool
) -> None:
    world.app.state.auth.limiter = RateLimiter(rate=1 / 60, burst=1)
    headers = bearer(ADMIN if admin else world.token)
    await world.call(method, path, kwargs, headers=headers)
    limited = await world.call(method, path, kwargs, headers=headers)
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "60"
    assert limited.json()["error"] == "rate_limited"


async def test_auth_rate_limit_is_429_with_retry_after_per_token(
    manager: AgentManager, settings: Settings, make_client: Callable[..., httpx.AsyncClient]
) -> None:
    limits = ApiSettings(rate_per_minute=1, rate_burst=3, token_cache_seconds=0)
    app = create_app(manager, settings, api_settings=limits)
    async with make_client(app) as client:
        agent_id = (await client.post("/agents", json={"name": "Pilot"})).json()["id"]
        token = (await client.post("/tokens", json={"name": "t", "agent_id": agent_id})).json()
        responses = [await client.get("/agents") for _ in range(3)]
        assert [r.status_code for r in responses] == [200, 429, 429]  # one request, one token
        assert responses[-1].headers["retry-after"] == "60"
        assert "rate limit reached for 'admin'" in responses[-1].json()["message"]
        other = await client.get(f"/agents/{agent_id}", headers=bearer(token["token"]))
        assert other.status_code == 200  # another token has its own bucket


async def test_auth_failed_attempts_are_rate_limited_per_address(
    manager: AgentManager, settings: Settings, make_client: Callable[..., httpx.AsyncClient]
) -> None:
    limits = ApiSettings(rate_per_minute=1, rate_burst=3)
    app = create_app(manager, settings, api_settings=limits)
    async with make_client(app, token="guess") as client:
        codes = [(await client.get("/agents")).status_code for _ in range(5)]
    assert codes[:3] == [401, 401, 401] and codes[-1] == 429


async def test_auth_without_admin_token_loopback_needs_the_local_token(
    make_manager: Callable[..., AgentManager],
    tmp_path: Any,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
) -> None:
    settings = load_settings({"CARRIER_DATA_DIR": str(tmp_path / "d")})
    app = create_app(make_manager(settings), settings, api_settings=api_settings)
    local_token = (tmp_path / "d" / "admin.token").read_text().strip()
    async with make_client(app, host="127.0.0.1", token=None) as local:
        refused = await local.post("/agents", json={"name": "Pilot"})
        assert refused.status_code == 401  # loopback alone is nobody
        assert "admin.token" in refused.json()["message"]
        admin = bearer(local_token)
        created = await local.post("/agents", json={"name": "Pilot"}, headers=admin)
        assert created.status_code == 201
        agent_id = created.json()["id"]
        token = (
            await local.post("/tokens", json={"name": "t", "agent_id": agent_id}, headers=admin)
        ).json()
        wrong = await local.get("/agents", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
    async with make_client(app, host="203.0.113.9", token=None) as remote:
        assert (await remote.get("/agents")).status_code == 401
        scoped = await remote.get(f"/agents/{agent_id}", headers=bearer(token["token"]))
        assert scoped.status_code == 200


def test_auth_server_refuses_public_bind_without_admin_token(tmp_path: Any) -> None:
    open_settings = load_settings({"CARRIER_DATA_DIR": str(tmp_path)})
    for host in ("127.0.0.1", "localhost", "::1"):
        check_bind(host, open_settings)
    with pytest.raises(ConfigError, match="CARRIER_ADMIN_TOKEN"):
        check_bind("0.0.0.0", open_settings)
    guarded = load_settings({"CARRIER_DATA_DIR": str(tmp_path), "CARRIER_ADMIN_TOKEN": ADMIN})
    check_bind("0.0.0.0", guarded)


async def test_auth_cors_closed_by_default_and_configurable(
    manager: AgentManager, settings: Settings, make_client: Callable[..., httpx.AsyncClient]
) -> None:
    preflight = {
        "Origin": "https://console.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    closed = create_app(manager, settings, api_settings=ApiSettings())
    async with make_client(closed) as client:
        response = await client.get("/health", headers={"Origin": "https://console.example"})
        assert "access-control-allow-origin" not in response.headers
    opened = create_app(
        manager,
        settings,
        api_settings=ApiSettings.model_validate(
            {"cors_origins": "https://console.example, https://other.example"}
        ),
    )
    async with make_client(opened) as client:
        response = await client.options("/agents", headers=preflight)
        assert response.headers["access-control-allow-origin"] == "https://console.example"
        evil = await client.options(
            "/agents", headers={**preflight, "Origin": "https://evil.example"}
        )
        assert "access-control-allow-origin" not in evil.headers
