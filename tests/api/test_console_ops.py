"""The Knowledge, Tools & tokens and Logs & audit views in headless Chromium, against a real
``carrier serve`` (the fake model and the hashing embedder; :mod:`tests.api._ops_carrier`):
a knowledge document uploaded and its chunks seen; a tool registered and tested against a
loopback tool server; a token created (shown once) and revoked; a client configuration set and
a refused one's problem seen with its path; the log tailed while the agent is talked to, a
failed turn's line arriving with the provider's key redacted, the level filter hiding it; the
audit log filtered. Then the same views with an agent's token: its own agent only, changes
refused with what to do. Screenshots go to ``test-artifacts/console-ops-*.png``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api._ops_carrier import LEAKED_KEY
from tests.api.test_console_browser import ARTIFACTS, CHROMIUM, OVERFLOWING, browser, expect
from tests.deploy.procs import ADMIN_TOKEN, ROOT, CarrierProcess, base_env, free_port
from tests.pipeline.test_tools import ToolServer

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (run .ci/browser-deps)"
)

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
GUIDE = (
    b"# Harbor guide\n\n" + (b"The harbor opens at dawn and closes at dusk. " * 30 + b"\n\n") * 12
)


@dataclass
class Served:
    url: str
    tools: ToolServer
    pilot: str
    other: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One ``carrier serve`` for the module, with two running agents and a tool server it may
    reach (loopback is allowed for tools here, and WEATHER_KEY may be sent there)."""
    tools = ToolServer()
    tools.thread.start()
    port = free_port()
    env = base_env(
        tmp_path_factory.mktemp("ops") / "data",
        CARRIER_TOOL_ENV="WEATHER_KEY@127.0.0.1",
        CARRIER_TOOL_INTERNAL_HOSTS="127.0.0.1",
        WEATHER_KEY="wk-ops-secret-1",
        CARRIER_RATE_PER_MINUTE="6000",
        CARRIER_RATE_BURST="1000",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.api._ops_carrier", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    server = CarrierProcess(proc, "serve")
    try:
        asyncio.run(server.wait_for("console on http", bound_s=60))
        url = f"http://127.0.0.1:{port}"
        ids = []
        with httpx.Client(base_url=url, headers=ADMIN, timeout=20) as http:
            for name in ("Pilot", "Other"):
                made = http.post("/agents", json={"name": name, "bio": [f"{name} helps."]})
                assert made.status_code == 201, made.text
                ids.append(made.json()["id"])
                assert http.post(f"/agents/{ids[-1]}/start").status_code == 200
        yield Served(url=url, tools=tools, pilot=ids[0], other=ids[1])
    finally:
        server.stop()
        tools.httpd.shutdown()
        tools.httpd.server_close()
    assert LEAKED_KEY not in server.output, "the provider's key reached the server's output"


async def _view(page: Any, url: str, view: str, token: str) -> None:
    await page.goto(f"{url}/console#token={token}")
    await page.evaluate("(v) => { location.hash = v; }", view)
    await expect(page.locator(f'[data-view="{view}"] .panel').first).to_be_visible()


async def test_console_ops_views_with_the_admin_token(served: Served, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    async with (
        httpx.AsyncClient(base_url=served.url, headers=ADMIN, timeout=20) as http,
        browser(tmp_path) as (page, errors, escaped),
    ):
        # Knowledge: upload a document and see its chunks.
        await _view(page, served.url, "knowledge", ADMIN_TOKEN)
        await page.locator("#knowledge-agent").select_option(served.pilot)
        await expect(page.locator("#knowledge-docs")).to_contain_text("No documents")
        await page.locator("#knowledge-file").set_input_files(
            {"name": "guide.md", "mimeType": "text/markdown", "buffer": GUIDE}
        )
        await page.get_by_role("button", name="Upload").click()
        row = page.locator("#knowledge-docs tbody tr").first
        await expect(row).to_contain_text("Harbor guide")
        await expect(row.locator(".badge")).to_have_text("synced")
        chunks = int(await row.locator("td.num").first.text_content() or "0")
        assert chunks > 1
        await expect(page.locator("#knowledge-summary")).to_contain_text(f"{chunks} chunk(s)")
        await page.locator("#knowledge-file").set_input_files(
            {"name": "deck.pptx", "mimeType": "application/octet-stream", "buffer": b"PK"}
        )
        await page.get_by_role("button", name="Upload").click()
        await expect(page.locator('[data-view="knowledge"] .notice.error')).to_contain_text(
            "upload a .txt, .md, .pdf file"
        )
        await page.get_by_role("button", name="Re-sync").click()
        await expect(page.locator('[data-view="knowledge"] .notice.ok')).to_contain_text(
            "1 unchanged"
        )
        await page.screenshot(path=str(ARTIFACTS / "console-ops-knowledge.png"), full_page=True)

        # Tools: register one, test it against the loopback tool server.
        await page.evaluate("() => { location.hash = 'access'; }")
        spec = {
            "name": "get_weather",
            "description": "The weather forecast for a city.",
            "url": f"{served.tools.url}/weather",
            "method": "GET",
            "headers": {"X-Api-Key": "$WEATHER_KEY"},
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
        await page.locator("#tool-spec").fill(json.dumps(spec))
        await page.get_by_role("button", name="Register tool").click()
        tool = page.locator('#tools-table tr[data-tool="get_weather"]')
        await expect(tool).to_contain_text(f"GET {served.tools.url}/weather")
        await tool.get_by_label("Arguments for get_weather").fill('{"city": "Oslo"}')
        await tool.get_by_role("button", name="Test").click()
        await expect(tool.locator(".acc-result.ok")).to_contain_text('"forecast": "sunny, 21C"')
        assert served.tools.requests[-1]["key"] == "wk-ops-secret-1"
        await expect(page.locator("body")).not_to_contain_text("wk-ops-secret-1")

        # Tokens: created and shown once, then revoked (and it no longer works).
        await page.locator("#token-name").fill("ops-walk")
        await page.locator("#token-agent").select_option(served.pilot)
        await page.get_by_role("button", name="Create token").click()
        secret = await page.locator("#token-once .acc-secret").text_content()
        assert secret and len(secret) > 20
        ok = await http.get(
            f"/agents/{served.pilot}", headers={"Authorization": f"Bearer {secret}"}
        )
        assert ok.status_code == 200
        await page.get_by_role("button", name="I have copied it").click()
        await expect(page.locator("#token-once")).to_be_hidden()
        await expect(page.locator('#tokens-table tr[data-token="ops-walk"]')).to_contain_text(
            "Pilot"
        )
        assert secret not in await page.content()
        await page.get_by_role("button", name="Revoke ops-walk").click()
        await expect(page.locator('#tokens-table tr[data-token="ops-walk"]')).to_have_count(0)
        gone = await http.get(
            f"/agents/{served.pilot}", headers={"Authorization": f"Bearer {secret}"}
        )
        assert gone.status_code == 401

        # Client configs: a valid one saved (checked), a refused one's problem with its path.
        await page.locator("#client-id").fill("discord")
        await page.locator("#client-config").fill('{"members_intent": true}')
        await page.get_by_role("button", name="Save").click()
        await expect(page.locator("#access-clients-status")).to_contain_text(
            "Saved discord (checked against the client's settings"
        )
        await page.locator("#client-config").fill('{"members_intent": "sometimes"}')
        await page.get_by_role("button", name="Save").click()
        await expect(page.locator("#client-problems code")).to_have_text("members_intent")
        await expect(page.locator("#access-clients-status")).to_have_class("notice error")
        stored = await http.get("/clients/discord/config")
        assert stored.json()["config"] == {"members_intent": True}
        await page.screenshot(path=str(ARTIFACTS / "console-ops-access.png"), full_page=True)

        # Logs: follow Pilot while it is talked to; a failed turn's line arrives, redacted.
        await page.evaluate("() => { location.hash = 'logs'; }")
        await page.locator("#log-agent").select_option(served.pilot)
        await page.get_by_role("button", name="Follow").click()
        await expect(page.locator("#log-status")).to_contain_text("Following Pilot at info")
        started = page.locator("#log-lines li", has_text=f"started Pilot ({served.pilot})")
        await expect(started.first).to_be_visible()
        said = await http.post(
            f"/{served.pilot}/message", json={"text": "hello", "user_id": "u1", "room_id": "r1"}
        )
        assert said.status_code == 200, said.text
        failed = await http.post(
            f"/{served.pilot}/message",
            json={"text": "please fail", "user_id": "u1", "room_id": "r1"},
        )
        assert failed.status_code >= 400 or failed.json()["ok"] is False
        line = page.locator("#log-lines li", has_text="Pilot: no answer from the model")
        await expect(line).to_have_count(1)
        await expect(line).to_contain_text("[redacted]")
        assert LEAKED_KEY not in await page.content()
        await page.screenshot(path=str(ARTIFACTS / "console-ops-logs.png"), full_page=True)
        await page.locator("#log-level").select_option("WARNING")
        await expect(page.locator("#log-status")).to_contain_text("at warning and above")
        await expect(page.locator('#log-lines li[data-level="INFO"]')).to_have_count(0)
        await page.locator("#log-level").select_option("INFO")
        await expect(line).to_have_count(1)  # kept lines come back at the lower level
        await page.get_by_role("button", name="Stop").click()

        # Audit: filtered by kind, then by actor.
        await page.locator("#audit-kind").fill("agent.start")
        await page.get_by_role("button", name="Filter").click()
        rows = page.locator("#audit-table tbody tr")
        await expect(rows.first).to_have_attribute("data-kind", "agent.start")
        kinds = await rows.evaluate_all("rows => rows.map(r => r.dataset.kind)")
        assert kinds and set(kinds) == {"agent.start"}
        await page.locator("#audit-kind").fill("")
        await page.locator("#audit-actor").fill("nobody-at-all")
        await page.get_by_role("button", name="Filter").click()
        await expect(rows).to_have_text(["Nothing matches these filters."])
        await page.screenshot(path=str(ARTIFACTS / "console-ops-audit.png"), full_page=True)

        # Readable at 400 px: no part of these views runs off the page.
        await page.set_viewport_size({"width": 400, "height": 900})
        for view in ("knowledge", "access", "logs"):
            await page.evaluate("(v) => { location.hash = v; }", view)
            await expect(page.locator(f'[data-view="{view}"]')).to_be_visible()
            assert await page.evaluate(OVERFLOWING, 400) == [], view
        assert errors == [] and escaped == []


async def test_console_ops_views_with_an_agent_token(served: Served, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=ADMIN, timeout=20) as http:
        made = await http.post("/tokens", json={"name": "ops-narrow", "agent_id": served.pilot})
        narrowed = made.json()["token"]
        await http.post(
            f"/{served.pilot}/message",
            json={"text": "fail again", "user_id": "u2", "room_id": "r2"},
        )
    async with browser(tmp_path) as (page, errors, escaped):
        await _view(page, served.url, "knowledge", narrowed)
        # Its own agent only.
        await expect(page.locator("#knowledge-agent option")).to_have_text(["Pilot"])
        await page.locator("#knowledge-file").set_input_files(
            {"name": "more.txt", "mimeType": "text/plain", "buffer": b"More harbor facts."}
        )
        await page.get_by_role("button", name="Upload").click()
        await expect(page.locator('[data-view="knowledge"] .notice.error')).to_contain_text(
            "needs the admin token"
        )

        await page.evaluate("() => { location.hash = 'access'; }")
        await expect(page.locator("#access-tools-status")).to_contain_text("needs the admin token")

        await page.evaluate("() => { location.hash = 'logs'; }")
        await expect(page.locator("#audit-status")).to_contain_text("needs the admin token")
        await page.get_by_role("button", name="Follow").click()
        line = page.locator("#log-lines li", has_text="Pilot: no answer from the model")
        await expect(line.first).to_contain_text("[redacted]")
        await page.screenshot(path=str(ARTIFACTS / "console-ops-narrowed.png"), full_page=True)
        assert errors == [] and escaped == []
