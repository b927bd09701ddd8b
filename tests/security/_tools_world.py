"""The world of the tool tests: a loopback tool server, the agent API with one running agent, a
model that calls the tools it is told to, an audit log and a job store (SQLite files).

The tool server listens on 127.0.0.1. Tools reach it through the name ``tools.internal``, which
the injected resolver maps to 127.0.0.1 and the operator's settings name as an internal host;
``TOOL_KEY`` may be sent there (``CARRIER_TOOL_ENV=TOOL_KEY@tools.internal``). Nothing resolves
through the system (the test guard forbids DNS beyond loopback): every name goes through
:class:`Resolver`, which records what it was asked.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.audit import AuditEvent, AuditFilter, SQLiteAuditLog
from carrier.jobs import SQLiteJobStore
from carrier.llm.base import ModelRequest, ModelResult
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings
from tests.api.conftest import ADMIN, create_running, xml
from tests.pipeline.conftest import tool_output

INTERNAL = "tools.internal"
KEY = "tool-credential-5e6f7a8b9c0d1e2f"
ADMIN_VALUE = ADMIN
AKIA = "AKIAIOSFODNN7EXAMPLE"


class ToolServer:
    """A tool endpoint on loopback that records every request. ``/echo`` answers 401 quoting
    the key it got (and an AWS key id, and a long tail); anything else answers 200 with JSON."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length", "0") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                server.requests.append(
                    {
                        "method": self.command,
                        "path": parts.path,
                        "query": parse_qs(parts.query),
                        "host": self.headers.get("Host"),
                        "key": self.headers.get("X-Api-Key"),
                        "body": json.loads(body) if body else None,
                    }
                )
                if parts.path == "/echo":
                    key = self.headers.get("X-Api-Key") or ""
                    data = f"bad key {key} (also {AKIA}) " + "x" * 1000
                    status = 401
                else:
                    data = json.dumps({"ran": parts.path, "n": len(server.requests)})
                    status = 200
                raw = data.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def url(self, path: str, host: str = INTERNAL) -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Resolver:
    """Names → addresses, as a test decides; records every lookup."""

    def __init__(self, table: Mapping[str, list[str]]) -> None:
        self.table = dict(table)
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self.table:
            raise OSError(f"no such host {host}")
        return list(self.table[host])


@dataclass
class World:
    manager: AgentManager
    app: Any
    client: httpx.AsyncClient
    model: FunctionModel
    server: ToolServer
    resolver: Resolver
    audit: SQLiteAuditLog
    jobs: SQLiteJobStore
    agent_id: str
    make_client: Callable[..., httpx.AsyncClient]
    next_calls: list[dict[str, Any]] = field(default_factory=list)
    """The tool calls the model makes when next offered tools (then it answers)."""

    def spec(self, **fields: Any) -> dict[str, Any]:
        """A GET tool at the internal host sending TOOL_KEY, changed by ``fields``."""
        return {
            "name": "lookup",
            "description": "Look something up.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "url": self.server.url("/ok"),
            "method": "GET",
            "headers": {"X-Api-Key": "$TOOL_KEY"},
            "timeout_s": 5,
            **fields,
        }

    async def register(self, **fields: Any) -> httpx.Response:
        return await self.client.post("/tools", json=self.spec(**fields))

    async def store_spec(self, **fields: Any) -> None:
        """A spec stored as an older version (or another process) left it, past the API's
        checks; the running agents get it."""
        raw = dict(await self.manager.store.get_setting("tools") or {})
        spec = self.spec(**fields)
        raw[spec["name"]] = spec
        await self.manager.store.set_setting("tools", raw)
        await self.manager.refresh_tools()

    async def say(
        self,
        text: str,
        *,
        calls: list[dict[str, Any]] | None = None,
        as_client: httpx.AsyncClient | None = None,
        user: str = "ana",
    ) -> dict[str, Any]:
        """``user`` says ``text`` through the API (the admin's client unless another is given);
        the model makes ``calls`` first (default: one ``lookup`` call)."""
        self.next_calls = (
            calls if calls is not None else [{"id": "c1", "name": "lookup", "arguments": {}}]
        )
        response = await (as_client or self.client).post(
            f"/{self.agent_id}/message", json={"text": text, "user_id": user}
        )
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()
        return data

    def tool_outputs(self) -> list[str]:
        """What the tools returned to the model in the last turn, unwrapped."""
        for request in reversed(self.model.requests):
            outputs = [tool_output(m.content) for m in request.messages if m.role == "tool"]
            if outputs:
                return outputs
        return []

    async def events(self, kind: str) -> list[AuditEvent]:
        """Audit events of ``kind``, oldest first."""
        page = await self.audit.list_events(AuditFilter(kinds=(kind,)), limit=1000)
        return list(reversed(page.items))

    async def helper_client(self) -> httpx.AsyncClient:
        """A client with a per-agent token: its messages come from someone who is no admin."""
        made = await self.client.post("/tokens", json={"name": "helper", "agent_id": self.agent_id})
        assert made.status_code == 201, made.text
        return self.make_client(self.app, token=made.json()["token"])


def answer(world: Callable[[], World]) -> Callable[[ModelRequest], str | ModelResult]:
    def fn(request: ModelRequest) -> str | ModelResult:
        w = world()
        outputs = [m for m in request.messages if m.role == "tool"]
        if outputs:
            return xml("Tool said: " + tool_output(outputs[-1].content))
        if request.tools and w.next_calls:
            calls, w.next_calls = w.next_calls, []
            return ModelResult(text="", model="fake", tool_calls=calls)
        return xml("No tool this time.")

    return fn


@pytest.fixture
async def world(
    tmp_path: Path,
    store: SQLiteStore,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
) -> AsyncIterator[World]:
    settings = load_settings(
        {
            "CARRIER_DATA_DIR": str(tmp_path / "data"),
            "CARRIER_ADMIN_TOKEN": ADMIN,
            "CARRIER_TOOL_ENV": f"TOOL_KEY@{INTERNAL}",
            "CARRIER_TOOL_INTERNAL_HOSTS": INTERNAL,
        }
    )
    holder: dict[str, World] = {}
    model = FunctionModel(answer(lambda: holder["w"]))
    server = ToolServer()
    resolver = Resolver({INTERNAL: ["127.0.0.1"]})
    audit = SQLiteAuditLog(path=tmp_path / "audit.db")
    jobs = SQLiteJobStore(path=tmp_path / "jobs.db")
    await audit.open()
    await jobs.open()
    manager = AgentManager(
        store=store,
        embedder=HashEmbedder(),
        settings=settings,
        environ={"TOOL_KEY": KEY, "CARRIER_ADMIN_TOKEN": ADMIN, "OPENAI_API_KEY": "sk-x" * 8},
        model_factory=lambda character: model,
        client_factories={},
        services={"audit": audit, "jobs": jobs},
    )
    manager.tools.policy = dataclasses.replace(manager.tools.policy, resolver=resolver)
    app = create_app(manager, settings, api_settings=api_settings)
    try:
        async with make_client(app) as client:
            agent_id = await create_running(client)
            holder["w"] = World(
                manager=manager,
                app=app,
                client=client,
                model=model,
                server=server,
                resolver=resolver,
                audit=audit,
                jobs=jobs,
                agent_id=agent_id,
                make_client=make_client,
            )
            yield holder["w"]
    finally:
        await manager.close()
        await jobs.close()
        await audit.close()
        server.close()
