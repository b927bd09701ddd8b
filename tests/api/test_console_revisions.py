"""The console's part of the store as the truth, in headless Chromium: an agent's revisions (who
made each, what it changed, a revert), an edit that never silently undoes another made
meanwhile, and each client's state from ``/health`` with the service's overall status.

The browser, its loopback-only network and its error collection are those of
``test_console_browser.py``; a CSP violation is collected here too.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from carrier.agents import AgentManager
from carrier.api import ApiSettings, api_server
from carrier.clients import Client, ClientState, ClientStatus
from carrier.settings import Settings
from tests.api import test_console_browser as console
from tests.api.test_console_browser import (
    ARTIFACTS,
    OVERFLOWING,
    browser,
    expect,
    local_admin,
    signed_in,
)

pytestmark = console.pytestmark
loopback_settings = console.loopback_settings  # the fixture: the local admin token, as carrier run

LORE = "Pilot flew the night mail over the mountains."
# User data that looks like markup: the console must show it as text.
MARKUP = '<b id="injected">Stormy</b> & "windy" nights'

CSP_WATCH = """
window.__csp = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


@asynccontextmanager
async def console_page(
    manager: AgentManager, settings: Settings, api_settings: ApiSettings, tmp_path: Path, **kw: Any
) -> AsyncIterator[tuple[Any, httpx.AsyncClient, str]]:
    """The API on a loopback port, an admin client, and the browser page; on the way out, no JS
    error, no CSP violation and no request that left loopback."""
    async with (
        api_server(manager, settings, port=0, api_settings=api_settings) as url,
        httpx.AsyncClient(base_url=url, timeout=10, headers=local_admin(settings)) as http,
        browser(tmp_path, **kw) as (page, errors, escaped),
    ):
        await page.add_init_script(CSP_WATCH)
        yield page, http, url
        assert await page.evaluate("window.__csp") == []
        assert errors == []
        assert escaped == []


async def create(http: httpx.AsyncClient, data: dict[str, Any]) -> str:
    created = await http.post("/agents", json=data)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def test_console_revisions_listed_diffed_and_reverted(
    make_manager: Callable[..., AgentManager],
    loopback_settings: Settings,
    api_settings: ApiSettings,
    tmp_path: Path,
) -> None:
    manager = make_manager(loopback_settings)
    try:
        async with console_page(manager, loopback_settings, api_settings, tmp_path) as (
            page,
            http,
            url,
        ):
            agent_id = await create(http, {"name": "Pilot", "bio": ["Flies."], "lore": [LORE]})
            await page.goto(signed_in(url, loopback_settings))
            await expect(page.locator(f"#agent-{agent_id} .meta")).to_have_text("revision 1")
            await expect(page.get_by_role("tab", name="History")).to_be_hidden()

            # An edit in the editor: revision 2, from the API, by the admin token's name.
            await page.get_by_role("button", name="Edit Pilot").click()
            await expect(page.locator("#editor-revision")).to_have_text("revision 1")
            await page.locator("#f-lore").fill(MARKUP)
            await page.get_by_role("button", name="Save changes").click()
            await expect(page.locator("#editor-status")).to_have_text("Pilot saved.")
            await expect(page.locator("#editor-revision")).to_have_text("revision 2")
            await expect(page.locator(f"#agent-{agent_id} .meta")).to_have_text("revision 2")
            stored = (await http.get(f"/agents/{agent_id}/revisions")).json()
            assert stored["head"] == 2
            made = [(r["number"], r["source"], r["actor"]) for r in stored["items"]]
            assert made == [(2, "console", "admin"), (1, "api", "admin")]

            await page.get_by_role("tab", name="History").click()
            newest = page.locator("#rev-list > li").first
            await expect(page.locator("#rev-list > li")).to_have_count(2)
            await expect(newest).to_have_id("rev-2")
            await expect(newest.locator(".rev-source")).to_have_text("console")
            await expect(newest.locator(".rev-actor")).to_have_text("admin")
            await expect(newest).to_contain_text("head")
            await expect(page.get_by_role("button", name="Revert to revision 2")).to_have_count(0)

            # What revision 2 changed: the field, its old and new text, and the YAML diff.
            await page.get_by_role("button", name="Changes in revision 2").click()
            diff = page.locator("#rev-diff")
            await expect(diff.locator("h3")).to_have_text(
                "Revision 2 against revision 1: 1 field changed."
            )
            await expect(diff.locator(".changes li")).to_have_text(
                f'lore[0] changed: "{LORE}" → {_json(MARKUP)}'
            )
            await expect(diff.locator(".diff-text .add")).to_contain_text(MARKUP)
            await expect(diff.locator(".diff-text .del")).to_contain_text(LORE)
            await expect(page.locator("#injected")).to_have_count(0)  # shown, never parsed
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "console-revisions.png"), full_page=True)

            # Revert to revision 1, after the question: a new revision with the old text.
            questions: list[str] = []

            async def accept(dialog: Any) -> None:
                questions.append(dialog.message)
                await dialog.accept()

            page.once("dialog", accept)
            await page.get_by_role("button", name="Revert to revision 1").click()
            await expect(page.locator("#editor-status")).to_have_text(
                "Pilot reverted to revision 1: its character is now revision 3."
            )
            assert questions and questions[0].startswith("Revert Pilot to revision 1?")
            await expect(page.locator("#editor-revision")).to_have_text("revision 3")
            await expect(page.locator("#rev-list > li").first).to_have_id("rev-3")
            await expect(page.locator("#rev-3 .rev-source")).to_have_text("revert")
            await expect(page.locator("#rev-3 .rev-note")).to_have_text("revert to revision 1")
            # The tabs by keyboard: End is the history, and the arrows wrap around.
            history_tab = page.get_by_role("tab", name="History")
            await page.get_by_role("tab", name="Form").press("End")
            await expect(history_tab).to_have_attribute("aria-selected", "true")
            await history_tab.press("ArrowRight")
            await expect(page.get_by_role("tab", name="Form")).to_be_focused()
            await expect(page.locator("#f-lore")).to_have_value(LORE)
            agent = (await http.get(f"/agents/{agent_id}")).json()
            assert (agent["revision"], agent["character"]["lore"]) == (3, [LORE])
            await expect(page.locator(f"#agent-{agent_id} .meta")).to_have_text("revision 3")
    finally:
        await manager.close()


def _json(text: str) -> str:
    """A string as the console shows a changed value (JSON, as JSON.stringify writes it)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def test_console_edit_over_a_newer_revision_asks_before_overwriting(
    make_manager: Callable[..., AgentManager],
    loopback_settings: Settings,
    api_settings: ApiSettings,
    tmp_path: Path,
) -> None:
    manager = make_manager(loopback_settings)
    try:
        async with console_page(manager, loopback_settings, api_settings, tmp_path) as (
            page,
            http,
            url,
        ):
            agent_id = await create(http, {"name": "Pilot", "bio": ["Flies."]})
            await page.goto(signed_in(url, loopback_settings))
            await page.get_by_role("button", name="Edit Pilot").click()
            await expect(page.locator("#editor-revision")).to_have_text("revision 1")

            # Someone else saves meanwhile (another browser, a script).
            other = {"name": "Pilot", "bio": ["Flies at night."]}
            assert (await http.put(f"/agents/{agent_id}", json=other)).status_code == 200

            await page.locator("#f-bio").fill("Flies by day.")
            await page.get_by_role("button", name="Save changes").click()
            conflict = page.locator("#editor-conflict")
            await expect(conflict).to_be_visible()
            await expect(conflict).to_contain_text(
                "Not saved: Pilot changed elsewhere since you opened it (revision 1): "
                "revision 2 by admin (api, "
            )
            await expect(conflict).to_contain_text("Reload to see it, or overwrite it")
            await expect(page.get_by_role("button", name="Reload")).to_be_focused()
            await expect(page.locator("#editor-status")).to_be_hidden()
            agent = (await http.get(f"/agents/{agent_id}")).json()
            assert (agent["revision"], agent["character"]["bio"]) == (2, ["Flies at night."])

            # Overwrite, on purpose: saved against the revision the conflict named.
            await page.get_by_role("button", name="Overwrite").click()
            await expect(page.locator("#editor-status")).to_have_text(
                "Pilot saved over revision 2."
            )
            await expect(conflict).to_be_hidden()
            await expect(page.locator("#editor-revision")).to_have_text("revision 3")
            agent = (await http.get(f"/agents/{agent_id}")).json()
            assert (agent["revision"], agent["character"]["bio"]) == (3, ["Flies by day."])

            # Again from the raw editor; this time Reload shows the newer character instead.
            again = {"name": "Pilot", "bio": ["Flies over the sea."]}
            assert (await http.put(f"/agents/{agent_id}", json=again)).status_code == 200
            await page.get_by_role("tab", name="Raw YAML / JSON").click()
            await page.get_by_label("Character file").fill("name: Pilot\nbio:\n  - Grounded.\n")
            await page.locator("#raw-save").click()
            await expect(conflict).to_contain_text("(revision 3): revision 4 by admin")
            await page.get_by_role("button", name="Reload").click()
            await expect(conflict).to_be_hidden()
            await expect(page.locator("#editor-revision")).to_have_text("revision 4")
            await expect(page.get_by_label("Character file")).to_have_value(
                re.compile("Flies over the sea")
            )
            agent = (await http.get(f"/agents/{agent_id}")).json()
            assert (agent["revision"], agent["character"]["bio"]) == (4, ["Flies over the sea."])
    finally:
        await manager.close()


class Beacon(Client):
    """A client whose connection state the test sets (as a real one's tracker would)."""

    name = "beacon"

    def __init__(self, states: Mapping[str, ClientState]) -> None:
        self.states = states

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    @property
    def state(self) -> ClientState:
        return self.states["now"]


async def test_console_shows_client_states_and_degraded_at_400px(
    make_manager: Callable[..., AgentManager],
    loopback_settings: Settings,
    api_settings: ApiSettings,
    tmp_path: Path,
) -> None:
    since = datetime(2026, 5, 2, 9, 12, tzinfo=UTC)
    error = "the beacon service refused the connection (HTTP 503); next try in 4 s"
    states = {"now": ClientState(status=ClientStatus.RETRYING, since=since, last_error=error)}

    def factory(runtime: Any, config: Mapping[str, Any], environ: Mapping[str, str]) -> Client:
        return Beacon(states)

    manager = make_manager(loopback_settings, client_factories={"beacon": factory})
    width = 400
    try:
        async with console_page(
            manager, loopback_settings, api_settings, tmp_path, width=width, height=800
        ) as (page, http, url):
            agent_id = await create(http, {"name": "Beacon", "clients": ["beacon"]})
            assert (await http.post(f"/agents/{agent_id}/start")).status_code == 200
            await page.goto(signed_in(url, loopback_settings))

            row = page.locator(f"#agent-{agent_id}")
            client = row.locator('.client[data-client="beacon"]')
            await expect(client).to_have_attribute("data-status", "retrying")
            await expect(client.locator(".chip")).to_have_text("beacon retrying")
            await expect(client.locator(".client-note")).to_contain_text(error)
            await expect(row.locator(".badge")).to_have_text("running")
            await expect(row.locator(".meta")).to_have_text("started by admin · revision 1")
            health = page.locator("#service-health")
            await expect(health).to_have_text(
                "Service degraded: Beacon's beacon client is retrying."
            )

            # Nothing scrolls sideways, the long error included; the editor's history too.
            assert await page.evaluate("document.scrollingElement.scrollWidth") <= width
            assert await page.evaluate(OVERFLOWING, width) == []
            for button in await row.locator("button").all():
                box = await button.bounding_box()
                assert box is not None and box["x"] + box["width"] <= width, box
            await page.get_by_role("button", name="Edit Beacon").click()
            await page.get_by_role("tab", name="History").click()
            await page.get_by_role("button", name="Changes in revision 1").click()
            await expect(page.locator("#rev-diff h3")).to_contain_text("Revision 1 against")
            assert await page.evaluate(OVERFLOWING, width) == []
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "console-clients-400px.png"), full_page=True)

            # The client comes back by itself: the page says so once it reads /health again.
            states["now"] = ClientState(status=ClientStatus.CONNECTED, since=since)
            await page.get_by_role("button", name="Refresh").click()
            await expect(client).to_have_attribute("data-status", "connected")
            await expect(health).to_have_text("Service ok: no configured client is down.")
    finally:
        await manager.close()
