"""A hostile model's secrets stop at every exit: the API's JSON and SSE, the store (read back
with an agent token), the log, Discord sends, Instagram captions and tool results; endpoint
credentials never show in /health or /agents; /metrics counts what was replaced."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aioftp
import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.assemble import ModelChoice
from carrier.character import Character
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.pipeline.base import HookPoint, HookResult, Turn
from carrier.plugins import Plugin
from carrier.runtime import AgentRuntime
from carrier.safety import MARKER, Redactor, using_redactor
from carrier.safety.known import configure_redactor
from carrier.safety.logs import install_log_redaction
from carrier.safety.redact import current_redactor, set_redactor
from carrier.settings import Settings, load_settings
from carrier.tools import ToolPolicy, ToolSpec, tool_action
from carrier.types import Author, Channel, Message, RoomKind
from tests.llm.openai_server import FakeOpenAIServer, Reply
from tests.security._hostile import (
    ADMIN_VALUE,
    AKIA,
    ENVIRON,
    HOSTILE_TEXT,
    KNOWN,
    VOICE_VALUE,
    hostile,
    leaks,
    xml,
)

CHARACTER: dict[str, Any] = {
    "name": "Pilot",
    "bio": ["Pilot answers questions about flying."],
    "clients": [],
    "settings": {
        "secrets": {"OPENAI_API_KEY": "$OPENAI_API_KEY", "ELEVENLABS_API_KEY": "$VOICE_CREDENTIAL"}
    },
}
BASE_PASSWORD = "base-password-3c5e7a9b1d"
BASE_KEY = "base-query-key-8e0a2c4d6f"


def sse_chunks(text: str) -> tuple[list[str], dict[str, Any]]:
    chunks, done = [], {}
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        if fields["event"] == "chunk":
            chunks.append(json.loads(fields["data"]))
        else:
            assert fields["event"] == "done", block
            done = json.loads(fields["data"])
    return chunks, done


@dataclass
class Api:
    client: httpx.AsyncClient
    manager: AgentManager
    agent_id: str


@pytest.fixture
def redactor() -> Iterator[Redactor]:
    previous = current_redactor()
    try:
        yield configure_redactor(environ=ENVIRON)
    finally:
        set_redactor(previous)


def _settings(tmp_path: Path, **extra: str) -> Settings:
    return load_settings(
        {"CARRIER_DATA_DIR": str(tmp_path / "data"), "CARRIER_ADMIN_TOKEN": ADMIN_VALUE, **extra}
    )


async def _api(manager: AgentManager, settings: Settings) -> Api:
    app = create_app(
        manager,
        settings,
        api_settings=ApiSettings(rate_per_minute=6000, rate_burst=1000, token_cache_seconds=0),
    )
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=("127.0.0.1", 40000)),
        base_url="http://localhost",
        headers={"Authorization": f"Bearer {ADMIN_VALUE}"},
    )
    created = await client.post("/agents", json=CHARACTER)
    assert created.status_code == 201, created.text
    agent_id = created.json()["id"]
    assert (await client.post(f"/agents/{agent_id}/start")).status_code == 200
    return Api(client, manager, agent_id)


@pytest.fixture
async def api(tmp_path: Path, redactor: Redactor) -> AsyncIterator[Api]:
    settings = _settings(tmp_path, CARRIER_FACT_INTERVAL="1")
    model = FunctionModel(hostile, chunk_size=5)  # every secret split across stream chunks
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        manager = AgentManager(
            store=store,
            embedder=HashEmbedder(),
            settings=settings,
            environ=ENVIRON,
            model_factory=lambda character: model,
        )
        api = await _api(manager, settings)
        try:
            yield api
        finally:
            await api.client.aclose()
            await manager.close()


async def test_redaction_api_json_sse_store_log_and_metrics(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    uninstall = install_log_redaction()
    try:
        with caplog.at_level(logging.DEBUG):
            plain = await api.client.post(
                f"/{api.agent_id}/message?include_thought=true", json={"text": "your keys?"}
            )
            streamed = await api.client.post(
                f"/{api.agent_id}/message",
                json={"text": "stream them"},
                headers={"Accept": "text/event-stream"},
            )
    finally:
        uninstall()
    body = plain.json()
    assert plain.status_code == 200 and leaks(plain.text) == []
    assert body["reply"].startswith("Of course! OPENAI_API_KEY is [redacted]")
    assert body["thought"] == "leak [redacted]"

    chunks, done = sse_chunks(streamed.text)
    assert len(chunks) > 5 and all(leaks(c) == [] for c in chunks)
    assert leaks("".join(chunks)) == [] and "".join(chunks) == done["reply"] == body["reply"]

    # What is stored, read back by a helper's per-agent token: replies and facts redacted.
    token = await api.client.post("/tokens", json={"name": "helper", "agent_id": api.agent_id})
    helper = {"Authorization": f"Bearer {token.json()['token']}"}
    memories = await api.client.get(f"/agents/{api.agent_id}/memories?limit=100", headers=helper)
    assert memories.status_code == 200
    texts = [m["text"] for m in memories.json()["items"]]
    assert any(t.startswith("Of course!") for t in texts) and leaks(memories.text) == []
    assert any("the admin token is [redacted]" in t for t in texts)  # a fact
    assert VOICE_VALUE not in memories.text

    assert leaks(caplog.text) == []
    metrics = (await api.client.get("/metrics")).text
    model_count = next(
        int(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith('carrier_redactions_total{where="model"}')
    )
    assert model_count >= 2 * 8  # two replies of eight secrets each, and the facts


async def test_redaction_api_is_a_final_guard_for_text_added_after_the_model(api: Api) -> None:
    async def leaky(point: HookPoint, turn: Turn) -> HookResult:
        return HookResult.modify(f"psst: {AKIA} and {ADMIN_VALUE}")

    api.manager.add_plugin(Plugin(name="leaky", hooks=[(HookPoint.BEFORE_OUTBOUND, leaky)]))
    response = await api.client.post(f"/{api.agent_id}/message", json={"text": "hi"})
    assert response.json()["reply"] == f"psst: {MARKER} and {MARKER}"
    metrics = (await api.client.get("/metrics")).text
    assert 'carrier_redactions_total{where="api"} 2' in metrics


async def test_redaction_loopback_model_through_litellm(tmp_path: Path) -> None:
    """The production path: CARRIER_MODEL + CARRIER_API_BASE, litellm over HTTP to a hostile
    OpenAI-compatible server on loopback, JSON and SSE."""
    server = FakeOpenAIServer(default=Reply(text=xml(HOSTILE_TEXT)))
    server.start()
    settings = _settings(
        tmp_path, CARRIER_MODEL="openai/loopback", CARRIER_API_BASE=server.base_url
    )
    previous = current_redactor()
    try:
        configure_redactor(environ=ENVIRON, settings=settings)
        async with SQLiteStore(path=tmp_path / "carrier.db") as store:
            manager = AgentManager(
                store=store, embedder=HashEmbedder(), settings=settings, environ=ENVIRON
            )
            api = await _api(manager, settings)
            try:
                plain = await api.client.post(f"/{api.agent_id}/message", json={"text": "keys?"})
                streamed = await api.client.post(
                    f"/{api.agent_id}/message",
                    json={"text": "stream them"},
                    headers={"Accept": "text/event-stream"},
                )
            finally:
                await api.client.aclose()
                await manager.close()
    finally:
        set_redactor(previous)
        server.stop()
    assert any(r.body.get("stream") for r in server.requests)  # both paths went over HTTP
    assert plain.status_code == 200 and leaks(plain.text) == []
    assert plain.json()["reply"].startswith("Of course! OPENAI_API_KEY is [redacted]")
    chunks, done = sse_chunks(streamed.text)
    assert leaks(streamed.text) == [] and "".join(chunks) == done["reply"] == plain.json()["reply"]


async def test_redaction_api_base_credentials_never_show(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """CARRIER_API_BASE with a password and a key in it: not in /agents/{id}, /health, the log
    line of the start, the model's description, nor the error when the call fails."""
    base = f"http://carrier:{BASE_PASSWORD}@127.0.0.1:9/v1?api_key={BASE_KEY}"
    settings = _settings(tmp_path, CARRIER_MODEL="openai/remote", CARRIER_API_BASE=base)
    previous = current_redactor()
    uninstall = install_log_redaction()
    try:
        configure_redactor(environ=ENVIRON, settings=settings)
        async with SQLiteStore(path=tmp_path / "carrier.db") as store:
            manager = AgentManager(
                store=store, embedder=HashEmbedder(), settings=settings, environ=ENVIRON
            )
            with caplog.at_level(logging.DEBUG):  # the manager names the endpoint at debug
                api = await _api(manager, settings)
                try:
                    agent = await api.client.get(f"/agents/{api.agent_id}")
                    health = await api.client.get("/health")
                    failed = await api.client.post(f"/{api.agent_id}/message", json={"text": "x"})
                finally:
                    await api.client.aclose()
                    await manager.close()
    finally:
        uninstall()
        set_redactor(previous)
    assert agent.json()["model"] == "openai/remote"
    assert health.json()["agents"][0]["model"] == "openai/remote"
    assert failed.status_code == 503  # httpx refuses a URL's user info beside a key
    assert failed.json()["error"] == "model_unavailable"
    assert "started Pilot" in caplog.text and "no answer from the model" in caplog.text
    assert "using openai/remote at http://carrier:***@127.0.0.1:9/v1" in caplog.text
    for shown in (agent.text, health.text, failed.text, caplog.text):
        assert BASE_PASSWORD not in shown and BASE_KEY not in shown
    choice = ModelChoice(provider=FunctionModel(hostile), model="openai/x", offline=False)
    choice.api_base = base
    assert (
        choice.description
        == "using openai/x at http://carrier:***@127.0.0.1:9/v1?api_key=%2A%2A%2A"
    )


async def test_redaction_discord_sends_are_guarded(tmp_path: Path) -> None:
    """The runtime's model is not wrapped here: the client's send path is the guard."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
        from clients.discord import create_client
        from clients.discord.fake import FakeDiscord

    async with (
        FakeDiscord(bot_name="Pilot", token="discord-bot-token-9d8c7b6a5f") as fake,
        SQLiteStore(path=tmp_path / "carrier.db") as store,
    ):
        fake.add_guild("Jam Club", ["general"])
        ana = fake.add_member(next(iter(fake.guilds.values())), "ana")
        model = FunctionModel(lambda r: xml(f"{HOSTILE_TEXT} and my token {fake.token}"))
        runtime = AgentRuntime(
            character=Character.model_validate(CHARACTER),
            store=store,
            embedder=HashEmbedder(),
            model=model,
            fact_interval=10_000,
        )
        await runtime.start()
        with using_redactor(Redactor([*KNOWN, fake.token])):
            client = create_client(
                runtime, {}, {"DISCORD_API_TOKEN": fake.token}, ready_timeout=10.0
            )
            await client.start()
            try:
                sent = await fake.post(ana, "what are your keys?")
                await fake.wait_sent(int(sent["channel_id"]), 1)
            finally:
                await client.stop()
    contents = "\n".join(s.content for s in fake.sent)
    assert contents.startswith("Of course! OPENAI_API_KEY is [redacted]")
    assert leaks(contents) == [] and fake.token not in contents
    assert contents.endswith(f"and my token {MARKER}")


async def test_redaction_instagram_caption_is_guarded(tmp_path: Path) -> None:
    from clients.instagram import Post, PostKind, publish_post
    from clients.instagram.fake import FakeGraphAPI
    from clients.instagram.ftp import FtpMediaHost
    from clients.instagram.graph import GraphAPI, GraphPublisher
    from clients.instagram.post import PublishStates
    from clients.instagram.quota import PublishCounter
    from tests.clients.instagram.helpers import FTP_PASSWORD, FTP_USER, ManualClock, make_image

    root = tmp_path / "ftp-root"
    (root / "media").mkdir(parents=True)
    ftp = aioftp.Server([aioftp.User(FTP_USER, FTP_PASSWORD, base_path=root)])
    await ftp.start("127.0.0.1", 0)
    clock = ManualClock()
    caption = f"Fog at six. {AKIA} {KNOWN[0]} #fog"
    try:
        with (
            FakeGraphAPI(token="graph-token-for-tests", static_root=root / "media") as graph,
            using_redactor(Redactor(KNOWN)),
        ):
            async with SQLiteStore(path=tmp_path / "carrier.db") as store:
                publisher = GraphPublisher(
                    api=GraphAPI(
                        access_token=graph.token, ig_user_id=graph.ig_user_id, base_url=graph.url
                    ),
                    host=FtpMediaHost(
                        host="127.0.0.1",
                        port=ftp.address[1],
                        user=FTP_USER,
                        password=FTP_PASSWORD,
                        directory="/media",
                        base_url=graph.media_url,
                        sleep=clock.sleep,
                    ),
                    counter=PublishCounter(store, "ig:count", limit=50, clock=clock),
                    clock=clock,
                    sleep=clock.sleep,
                )
                photo = make_image(tmp_path / "fog.jpg")
                post = Post(key="p1", kind=PostKind.PHOTO, media=[photo], caption=caption)
                await publish_post(post, publisher=publisher, states=PublishStates(store, "a"))
            published = graph.published[0]["caption"]
    finally:
        await ftp.close()
    assert published == f"Fog at six. {MARKER} {MARKER} #fog"


class EchoingToolServer:
    """A tool endpoint that quotes the key it was sent, in a 401 or in a 200."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                key = self.headers.get("X-Api-Key") or ""
                status = 401 if self.path.startswith("/secret") else 200
                body = f"key {key} (and {AKIA})".encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"


async def test_redaction_tool_outputs_and_error_bodies(caplog: pytest.LogCaptureFixture) -> None:
    server = EchoingToolServer()
    tool_key = "weather-credential-5e6f7a8b9c"
    environ = {"WEATHER_CREDENTIAL": tool_key}  # not credential-named: known through the tool
    try:
        with using_redactor(Redactor()) as redactor, caplog.at_level(logging.INFO):
            results = []
            for path in ("/ok", "/secret"):
                spec = ToolSpec(
                    name="weather",
                    description="Weather",
                    url=server.url(path),
                    method="GET",
                    headers={"X-Api-Key": "$WEATHER_CREDENTIAL"},
                )
                # The operator lets tools reach the loopback server and send the key to it.
                policy = ToolPolicy.of(
                    env=["WEATHER_CREDENTIAL@127.0.0.1"], internal_hosts=["127.0.0.1"]
                )
                action = tool_action(spec, environ=environ, policy=policy)
                turn = SimpleNamespace(
                    current_tool_call={"arguments": {}},
                    message=Message(
                        platform="test",
                        author=Author(platform_id="ana", name="Ana"),
                        channel=Channel(platform_id="dm", kind=RoomKind.DM),
                    ),
                    runtime=SimpleNamespace(agent_id="a", services={}),
                )
                results.append(await action.handler(turn))  # type: ignore[arg-type]
            assert len(redactor) == 1
    finally:
        server.httpd.shutdown()
    ok, failed = results
    assert ok.data["output"] == f"key {MARKER} (and {MARKER})"
    assert not failed.ok and failed.error is not None
    assert failed.error.endswith(f"HTTP 401: key {MARKER} (and {MARKER})")
    assert tool_key not in json.dumps(failed.data) and tool_key not in caplog.text
    assert AKIA not in caplog.text
