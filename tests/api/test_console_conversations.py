"""The console's Conversations view in headless Chromium, against a real ``carrier serve`` (its
own process, the fake model at made-up prices, the hashing embedder): people chat with a
persona through the API; the view lists the rooms and people, shows a room's history with a
turn's trace (thought, actions, timings, cost), searches memory by words and by meaning, shows
a person's fact, exports their data, and forgets them after a confirmation that names what
goes, after which their memories are gone. An agent's token sees its agent only and may not
forget. Screenshots go to ``test-artifacts/console-conversations*.png``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from carrier.memory.rights import entity_id_for
from tests.api._conversations_carrier import FACT
from tests.api.test_console_browser import ARTIFACTS, OVERFLOWING, browser, expect
from tests.deploy.procs import ADMIN_TOKEN, ROOT, CarrierProcess, base_env, free_port

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ANA = {"room_id": "harbor", "user_id": "ana", "user_name": "Ana"}
BO = {"room_id": "quay", "user_id": "bo", "user_name": "Bo"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One ``carrier serve`` for the module; yields its base URL."""
    data = tmp_path_factory.mktemp("conversations-data")
    port = free_port()
    env = base_env(data, CARRIER_FACT_INTERVAL="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.api._conversations_carrier", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    web = CarrierProcess(proc, "serve")
    try:
        deadline = time.monotonic() + 120  # a bound against hanging, not a measure of speed
        while not web.has("/console"):
            assert proc.poll() is None, f"carrier serve exited:\n{web.output[-4000:]}"
            assert time.monotonic() < deadline, f"carrier serve never started:\n{web.output}"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        assert web.stop() == 0, web.output[-3000:]


async def persona(http: httpx.AsyncClient, name: str) -> str:
    created = await http.post("/agents", json={"name": name, "bio": [f"{name} keeps watch."]})
    assert created.status_code == 201, created.text
    agent_id: str = created.json()["id"]
    assert (await http.post(f"/agents/{agent_id}/start")).status_code == 200
    return agent_id


async def say(http: httpx.AsyncClient, agent_id: str, text: str, who: dict[str, str]) -> None:
    sent = await http.post(f"/{agent_id}/message", json={"text": text, **who})
    assert sent.status_code == 200, sent.text


async def fact_stored(http: httpx.AsyncClient, agent_id: str, entity_id: str) -> None:
    """Until the fact extraction (run after the turn, in the background) has stored its fact."""
    deadline = time.monotonic() + 30  # a bound against hanging
    while True:
        person = (await http.get(f"/agents/{agent_id}/people/{entity_id}")).json()
        if person["facts"]:
            return
        assert time.monotonic() < deadline, person
        await asyncio.sleep(0.1)


async def open_conversations(page: object, url: str, token: str) -> None:
    await page.goto(f"{url}/console#token={token}")  # type: ignore[attr-defined]
    await page.get_by_role("link", name="Conversations").click()  # type: ignore[attr-defined]


async def test_console_conversations_trace_search_export_and_forget(
    server: str, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=server, headers=ADMIN, timeout=30) as http:
        keeper = await persona(http, "Keeper")
        await say(http, keeper, "When does the tide turn? Ask Zebulon.", ANA)
        await say(http, keeper, "Is the ferry late?", BO)
        ana = entity_id_for(keeper, "api", "ana")
        for entity_id in (ana, entity_id_for(keeper, "api", "bo")):
            await fact_stored(http, keeper, entity_id)

        async with browser(tmp_path) as (page, errors, escaped):
            await open_conversations(page, server, ADMIN_TOKEN)
            view = page.locator('[data-view="conversations"]')
            await expect(page.locator("#conv-agent")).to_have_value(keeper)
            # Rooms, most recently active first, with their people; the newest is open.
            rooms = page.locator("#conv-rooms .conv-pick")
            await expect(rooms).to_have_count(2)
            await expect(rooms.nth(0)).to_contain_text("quay")
            await expect(rooms.nth(0)).to_contain_text("Bo")
            await expect(rooms.nth(1)).to_contain_text("Ana")
            await expect(page.locator("#conv-history-title")).to_have_text("Room: quay")

            # Ana's room: her message, the reply and the turn's trace.
            await rooms.nth(1).click()
            await expect(page.locator("#conv-history-title")).to_have_text("Room: harbor")
            history = page.locator("#conv-history")
            await expect(history.locator(".conv-msg.user")).to_contain_text("Ask Zebulon")
            reply = history.locator(".conv-msg.agent")
            await expect(reply).to_contain_text("re: When does the tide turn?")
            trace = reply.locator("details.turn-trace")
            await expect(trace.locator("summary")).to_contain_text("Trace: REPLY")
            await trace.locator("summary").click()
            await expect(trace).to_contain_text("the keeper asks about the tide")
            await expect(trace.locator(".trace-actions")).to_have_text("REPLY: ok")
            stages = trace.locator(".trace-timings th")
            await expect(stages).to_contain_text(["message", "state", "generate", "actions"])
            await expect(trace.locator(".trace-cost")).to_contain_text("keeper-model")
            assert "$0 " not in await trace.locator(".trace-cost").inner_text()  # it cost money
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "console-conversations.png"), full_page=True)

            # Memory search, by words and by meaning.
            await page.locator("#conv-q").fill("zebulon")
            await page.locator("#conv-mode").select_option("words")
            await page.get_by_role("button", name="Search", exact=True).click()
            results = page.locator("#conv-results .conv-result")
            await expect(results.first).to_contain_text("Ask Zebulon")
            await page.locator("#conv-q").fill("ferry")
            await page.locator("#conv-mode").select_option("meaning")
            await page.get_by_role("button", name="Search", exact=True).click()
            await expect(results.first).to_contain_text("score")

            # The people: Ana with her fact; her data downloaded.
            people = page.locator("#conv-people .conv-pick")
            await expect(people).to_have_count(2)
            await people.filter(has_text="Ana").click()
            person = page.locator("#conv-person")
            await expect(person.locator("h3")).to_have_text("Ana")
            await expect(person).to_contain_text(FACT)
            async with page.expect_download() as download_info:
                await page.get_by_role("button", name="Export their data").click()
            download = await download_info.value
            saved = tmp_path / download.suggested_filename
            await download.save_as(saved)
            lines = [json.loads(line) for line in saved.read_text().splitlines()]
            assert {m["content"]["text"] for m in lines} >= {
                "When does the tide turn? Ask Zebulon.",
                FACT,
            }
            assert all(m["entity_id"] == ana for m in lines)

            # Forget her: the confirmation names what goes; the report says what went.
            await page.get_by_role("button", name="Forget Ana…").click()
            confirm = page.locator("#conv-confirm")
            await expect(confirm).to_contain_text("Forget Ana (api ana)?")
            await expect(confirm).to_contain_text("1 message they wrote")
            await expect(confirm).to_contain_text("the agent's replies to them")
            await page.get_by_role("button", name="Forget Ana", exact=True).click()
            report = page.locator("#conv-forget-report")
            await expect(report).to_contain_text("Forgot Ana: 3 memories deleted.")
            await expect(report).to_contain_text("1 reply of the agent to them")
            await expect(report).to_contain_text("their record (names, platform id)")
            await expect(people).to_have_count(1)
            await expect(rooms).to_have_count(1)
            await expect(page.locator("#conv-history-title")).to_have_text("Room history")
            await page.screenshot(
                path=str(ARTIFACTS / "console-conversations-forget.png"), full_page=True
            )
            # Her memories are gone: not found by words, not in the export.
            await page.locator("#conv-q").fill("zebulon")
            await page.locator("#conv-mode").select_option("words")
            await page.get_by_role("button", name="Search", exact=True).click()
            await expect(page.locator("#conv-results")).to_contain_text("Nothing found.")
            export = await http.get(f"/agents/{keeper}/memories/export")
            left = [json.loads(line) for line in export.text.splitlines()]
            assert "Zebulon" not in export.text
            assert ana not in {m["entity_id"] for m in left}
            assert sorted(m["content"]["text"] for m in left) == sorted(
                ["Is the ferry late?", "re: Is the ferry late?", FACT]  # Bo's are kept
            )

            # Readable at 400 px: nothing wider than the screen.
            await page.set_viewport_size({"width": 400, "height": 900})
            await expect(view).to_be_visible()
            assert await page.evaluate("document.scrollingElement.scrollWidth") <= 400
            assert await page.evaluate(OVERFLOWING, 400) == []
            await page.screenshot(
                path=str(ARTIFACTS / "console-conversations-400.png"), full_page=True
            )
            assert errors == []
            assert escaped == []


async def test_console_conversations_with_an_agent_token(server: str, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=server, headers=ADMIN, timeout=30) as http:
        ferry = await persona(http, "Ferry")
        await say(http, ferry, "One ticket, please.", BO)
        made = await http.post("/tokens", json={"name": "ferry-ops", "agent_id": ferry})
        assert made.status_code == 201, made.text
        scoped = made.json()["token"]

        async with browser(tmp_path) as (page, errors, escaped):
            await open_conversations(page, server, scoped)
            # Its own agent only (GET /agents is the admin's).
            await expect(page.locator("#conv-agent option")).to_have_count(1)
            await expect(page.locator("#conv-agent")).to_have_value(ferry)
            await expect(page.locator("#conv-history .conv-msg.agent")).to_contain_text(
                "re: One ticket, please."
            )
            await page.locator("#conv-people .conv-pick").first.click()
            await page.get_by_role("button", name="Forget Bo…").click()
            await page.get_by_role("button", name="Forget Bo", exact=True).click()
            await expect(page.locator("#conv-person-status")).to_contain_text(
                "needs the admin token"
            )
            await page.screenshot(
                path=str(ARTIFACTS / "console-conversations-agent-token.png"), full_page=True
            )
            assert escaped == []
            assert errors == []
        people = (await http.get(f"/agents/{ferry}/people")).json()
        assert [p["name"] for p in people] == ["Bo"]  # nothing was forgotten
