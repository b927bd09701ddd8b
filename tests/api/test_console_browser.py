"""The web console in headless Chromium (Debian ``chromium`` driven by Playwright for Python):
create a persona through the raw editor (first with a mistake) and through the form, start it,
chat with it and watch the reply stream in. A screenshot is saved to
``test-artifacts/console-chat.png``.

CI installs both (``.ci/browser-deps`` and the ``dev`` extra); without them the tests skip.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, api_server
from carrier.fleet.model import DesiredState
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.local_token import admin_token
from carrier.settings import Settings, load_settings
from tests.api.conftest import ADMIN, REPO, bearer, create_running, xml

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Belt and braces: no name resolves except loopback.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]

playwright_api = pytest.importorskip(
    "playwright.async_api",
    reason="Playwright for Python is not installed (make install-dev)",
)
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (run .ci/browser-deps)"
)
expect = playwright_api.expect
expect.set_options(timeout=15_000)

PIECES = ["Fair winds, sailor! ", "The tide turns ", "at noon."]
REPLY = "".join(PIECES)


class GatedModel(FunctionModel):
    """Streams :data:`PIECES`, waiting before each piece after the first until the test opens
    its gate: the test sees the page between pieces, with no timing assumptions."""

    def __init__(self) -> None:
        super().__init__(self._answer, model="gated")
        self.gates: list[asyncio.Event] = [asyncio.Event() for _ in PIECES[1:]]

    @staticmethod
    def _answer(request: ModelRequest) -> str:
        if request.purpose == "facts":
            return "[]"
        if request.purpose == "should_respond":
            return "RESPOND"
        return xml(REPLY, thought="never shown")

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.last_result = None
        result = await self.generate(request)
        head, _, _ = result.text.partition(PIECES[0])
        yield head + PIECES[0]
        for gate, piece in zip(self.gates, PIECES[1:], strict=True):
            await gate.wait()
            yield piece
        yield "</text></response>"
        self.last_result = result

    def open_all(self) -> None:
        for gate in self.gates:
            gate.set()


@pytest.fixture
def gated() -> Iterator[GatedModel]:
    model = GatedModel()
    yield model
    model.open_all()  # a failed test must not leave a turn waiting


@asynccontextmanager
async def browser(
    tmp_path: Path, *, width: int = 1360, height: int = 1000
) -> AsyncIterator[tuple[Any, list[str], list[str]]]:
    """A fresh Chromium profile and one page of ``width`` CSS pixels; yields it with the console
    errors and the requests that tried to leave loopback (both should stay empty)."""
    errors: list[str] = []
    escaped: list[str] = []

    async def only_loopback(route: Any) -> None:
        host = urlsplit(route.request.url).hostname or ""
        if route.request.url.startswith("data:") or host in ("127.0.0.1", "localhost"):
            await route.continue_()
        else:
            escaped.append(route.request.url)
            await route.abort()

    def on_console(message: Any) -> None:
        # Chromium logs every 4xx answer as "Failed to load resource"; the tests cause some.
        if message.type == "error" and "Failed to load resource" not in message.text:
            errors.append(message.text)

    async with playwright_api.async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": width, "height": height},
        )
        try:
            await context.route("**/*", only_loopback)
            page = context.pages[0] if context.pages else await context.new_page()
            page.on("console", on_console)
            page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
            yield page, errors, escaped
        finally:
            await context.close()


@pytest.fixture
def loopback_settings(tmp_path: Path) -> Settings:
    """No CARRIER_ADMIN_TOKEN (``make run``'s default): the server mints a local admin token
    into the data dir, and the console gets it from the link carrier run prints."""
    return load_settings({"CARRIER_DATA_DIR": str(tmp_path / "data")})


def local_admin(settings: Settings) -> dict[str, str]:
    """The local admin token as a bearer header (for the test's own HTTP client)."""
    return bearer(admin_token(settings).value)


def signed_in(url: str, settings: Settings, path: str = "/console") -> str:
    """The console link as ``carrier run`` prints it on a terminal: the token in the fragment."""
    return f"{url}{path}#token={admin_token(settings).value}"


async def test_console_create_persona_chat_and_see_stream(
    make_manager: Callable[..., AgentManager],
    loopback_settings: Settings,
    api_settings: ApiSettings,
    gated: GatedModel,
    tmp_path: Path,
) -> None:
    manager = make_manager(loopback_settings, model_factory=lambda character: gated)
    try:
        async with (
            api_server(manager, loopback_settings, port=0, api_settings=api_settings) as url,
            httpx.AsyncClient(
                base_url=url, timeout=10, headers=local_admin(loopback_settings)
            ) as http,
            browser(tmp_path) as (page, errors, escaped),
        ):
            await page.goto(signed_in(url, loopback_settings, "/"))
            assert page.url == url + "/console"  # the token left the address bar at once
            await expect(page.locator("#token-state")).to_have_text("Token set for this tab.")
            assert await page.evaluate("sessionStorage.getItem('carrier.adminToken')") == (
                admin_token(loopback_settings).value
            )
            await expect(page.locator("#agents-empty")).to_be_visible()

            # The raw editor, with a mistake: the problem is listed with its field path.
            await page.get_by_role("tab", name="Raw YAML / JSON").click()
            raw = page.get_by_label("Character file")
            await raw.fill("name: Broken\nbio:\n  - fine\nstyle:\n  all: 3\n")
            await page.locator("#raw-save").click()
            problems = page.locator("#raw-problems")
            await expect(problems).to_contain_text("style.all")
            await expect(problems).to_contain_text("expected a string or a list of strings")
            await expect(raw).to_have_attribute("aria-invalid", "true")
            assert (await http.get("/agents")).json() == []
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "console-raw-error.png"))

            # Fixed, it saves; the problems go away.
            await raw.fill("name: Lighthouse\nbio:\n  - Lighthouse keeps the light on.\n")
            await page.locator("#raw-save").click()
            await expect(page.locator("#editor-status")).to_have_text("Lighthouse created.")
            await expect(problems).to_be_hidden()
            await expect(page.locator("#agents tbody tr")).to_have_count(1)

            # The form: a blank name comes back from the validator next to the name field.
            await page.get_by_role("button", name="New persona").click()
            await page.get_by_role("tab", name="Form").click()
            await page.get_by_label("Name", exact=True).fill("   ")
            await page.locator("#form-save").click()
            name_error = page.locator("#f-name-error")
            await expect(name_error).to_contain_text("name")
            await expect(name_error).to_contain_text("non-empty name")
            await expect(page.get_by_label("Name", exact=True)).to_have_attribute(
                "aria-invalid", "true"
            )

            await page.get_by_label("Name", exact=True).fill("Skipper")
            await page.locator("#f-bio").fill(
                "Skipper runs the harbor ferry.\nSkipper knows every tide."
            )
            await page.locator("#f-lore").fill("Skipper once sailed through a storm.")
            await page.locator("#f-adjectives").fill("salty, kind")
            await page.locator("#f-topics").fill("tides\nboats")
            await page.locator("#f-style-all").fill("short sentences")
            await page.get_by_label("Someone says").first.fill("hello")
            await page.get_by_label("The persona replies").first.fill("Ahoy there!")
            await page.locator("#form-save").click()
            await expect(page.locator("#editor-status")).to_have_text("Skipper created.")
            await expect(name_error).to_have_count(0)

            agents = {a["name"]: a for a in (await http.get("/agents")).json()}
            character = agents["Skipper"]["character"]
            assert character["bio"] == [
                "Skipper runs the harbor ferry.",
                "Skipper knows every tide.",
            ]
            assert character["adjectives"] == ["salty", "kind"]
            assert character["topics"] == ["tides", "boats"]
            assert character["style"]["all"] == ["short sentences"]
            example = character["messageExamples"][0]
            assert [m["content"]["text"] for m in example] == ["hello", "Ahoy there!"]

            # Start it; the row says it runs, on which model.
            row = page.locator(f"#agent-{agents['Skipper']['id']}")
            await expect(row).to_contain_text("stopped")
            await page.get_by_role("button", name="Start Skipper").click()
            await expect(row.locator(".badge")).to_have_text("running")
            shown_model = (await http.get(f"/agents/{agents['Skipper']['id']}")).json()["model"]
            await expect(row.locator(".model")).to_have_text(shown_model)

            # Edit it while it runs: the form writes over the stored character.
            await expect(page.locator("#editor-heading")).to_have_text("Edit Skipper")
            await page.locator("#f-lore").fill("Skipper once sailed through a storm.\nAnd back.")
            await page.get_by_role("button", name="Save changes").click()
            await expect(page.locator("#editor-status")).to_have_text("Skipper saved.")
            saved = (await http.get(f"/agents/{agents['Skipper']['id']}")).json()
            assert saved["character"]["lore"][-1] == "And back."
            assert saved["character"]["bio"] == character["bio"]
            assert saved["running"] is True

            # Chat: the reply streams in, piece by piece, as the model releases it.
            await page.get_by_role("button", name="Chat with Skipper").click()
            await expect(page.get_by_label("Agent", exact=True)).to_have_value(
                agents["Skipper"]["id"]
            )
            await page.get_by_label("Message", exact=True).fill("When does the tide turn?")
            await page.get_by_label("Message", exact=True).press("Enter")
            log = page.get_by_role("log")
            await expect(log.locator(".msg.user .text")).to_have_text("When does the tide turn?")
            answer = log.locator(".msg.agent .text")
            shown = ""
            for n, gate in enumerate(gated.gates, start=1):
                shown = "".join(PIECES[:n])
                await expect(answer).to_have_text(shown)
                await expect(log.locator(".msg.agent")).to_have_class("msg agent streaming")
                gate.set()
            await expect(answer).to_have_text(REPLY)
            await expect(log.locator(".msg.agent")).to_have_class("msg agent")
            await expect(page.locator("#chat-status")).to_have_text("")
            assert "never shown" not in await page.content()

            await page.screenshot(path=str(ARTIFACTS / "console-chat.png"), full_page=True)

            # Delete asks first.
            await page.get_by_role("button", name="Edit Lighthouse").click()
            await expect(page.locator("#editor-heading")).to_have_text("Edit Lighthouse")

            async def accept(dialog: Any) -> None:
                assert "Delete Lighthouse" in dialog.message
                await dialog.accept()

            page.once("dialog", accept)
            await page.get_by_role("button", name="Delete Lighthouse").click()
            await expect(page.locator("#agents tbody tr")).to_have_count(1)
            await expect(page.locator("#editor-heading")).to_have_text("New persona")
            assert [a["name"] for a in (await http.get("/agents")).json()] == ["Skipper"]
            assert errors == []
            assert escaped == []
    finally:
        await manager.close()


async def test_console_admin_token_from_session_storage(
    make_manager: Callable[..., AgentManager],
    settings: Settings,
    api_settings: ApiSettings,
    tmp_path: Path,
) -> None:
    """Without a token the page asks for one; it keeps it in sessionStorage only, sends it as a
    bearer token, and never shows it."""
    manager = make_manager(settings)
    sent: list[str | None] = []
    try:
        async with (
            api_server(manager, settings, port=0, api_settings=api_settings) as url,
            browser(tmp_path) as (page, errors, escaped),
        ):

            def on_request(request: Any) -> None:
                if urlsplit(request.url).path == "/agents":
                    sent.append(request.headers.get("authorization"))

            page.on("request", on_request)
            await page.goto(url + "/console")
            # No token yet: the page asks for one, says where to find it, and waits in the field.
            await expect(page.locator("#agents-status")).to_contain_text("Enter the admin token")
            await expect(page.locator("#agents-status")).to_contain_text("admin.token")
            await expect(page.get_by_label("Admin token")).to_be_focused()
            assert sent == []  # nothing asked of the server without a token

            await page.get_by_label("Admin token").fill(ADMIN)
            await page.get_by_role("button", name="Use token").click()
            await expect(page.locator("#token-state")).to_have_text("Token set for this tab.")
            await expect(page.locator("#agents-status")).to_be_hidden()
            await expect(page.locator("#agents-empty")).to_be_visible()
            assert sent[-1] == f"Bearer {ADMIN}"
            assert await page.get_by_label("Admin token").input_value() == ""
            assert ADMIN not in await page.content()
            stored = await page.evaluate("sessionStorage.getItem('carrier.adminToken')")
            assert stored == ADMIN
            assert await page.evaluate("localStorage.length") == 0

            await page.get_by_role("button", name="Forget").click()
            await expect(page.locator("#agents-status")).to_contain_text("Enter the admin token")
            assert await page.evaluate("sessionStorage.length") == 0
            assert errors == []
            assert escaped == []
    finally:
        await manager.close()


async def test_console_chat_history_shown_after_reload(
    make_manager: Callable[..., AgentManager],
    loopback_settings: Settings,
    api_settings: ApiSettings,
    tmp_path: Path,
) -> None:
    """The chat is one conversation per browser: a reload shows what was said, oldest first."""
    manager = make_manager(loopback_settings)
    try:
        async with (
            api_server(manager, loopback_settings, port=0, api_settings=api_settings) as url,
            httpx.AsyncClient(
                base_url=url, timeout=10, headers=local_admin(loopback_settings)
            ) as http,
            browser(tmp_path) as (page, errors, escaped),
        ):
            agent_id = await create_running(http)
            # Someone else's conversation with the agent stays out of this one.
            other = {"text": "not for the console", "room_id": "elsewhere"}
            assert (await http.post(f"/{agent_id}/message", json=other)).status_code == 200

            await page.goto(signed_in(url, loopback_settings))
            log = page.get_by_role("log")
            await expect(log.locator(".empty")).to_have_text("No messages yet.")
            said = ["first light?", "Ahoy! You said: first light?"]
            await page.get_by_label("Message", exact=True).fill(said[0])
            await page.get_by_role("button", name="Send").click()
            await expect(log.locator(".msg.agent .text")).to_have_text(said[1])

            await page.reload()
            await expect(log.locator(".msg")).to_have_count(2)
            assert await log.locator(".msg .text").all_text_contents() == said
            assert await log.locator(".msg .who").all_text_contents() == ["You", "Pilot"]
            await expect(log.locator(".empty")).to_have_count(0)

            # The conversation goes on after the history; another reload shows all of it.
            await page.get_by_label("Message", exact=True).fill("and the tide?")
            await page.get_by_label("Message", exact=True).press("Enter")
            await expect(log.locator(".msg")).to_have_count(4)
            await expect(log.locator(".msg.agent .text").last).to_have_text(
                "Ahoy! You said: and the tide?"
            )
            await page.reload()
            await expect(log.locator(".msg")).to_have_count(4)
            texts = await log.locator(".msg .text").all_text_contents()
            assert texts == [*said, "and the tide?", "Ahoy! You said: and the tide?"]

            # It is this browser's own room, as the API names it.
            chat_id = await page.evaluate("localStorage.getItem('carrier.consoleChatId')")
            assert await page.evaluate("Object.keys(localStorage)") == ["carrier.consoleChatId"]
            room = {"room_id": f"console:{chat_id}"}
            stored = (await http.get(f"/agents/{agent_id}/messages", params=room)).json()
            assert [m["text"] for m in stored["items"]] == texts
            assert errors == []
            assert escaped == []
    finally:
        await manager.close()


START_HINT = re.compile(r"\bstart\b", re.IGNORECASE)


async def test_console_chat_says_what_the_agent_state_is(
    make_manager: Callable[..., AgentManager],
    loopback_settings: Settings,
    api_settings: ApiSettings,
    tmp_path: Path,
) -> None:
    """A running agent is never told to start; a stopped one is, and Send waits for it."""
    manager = make_manager(loopback_settings)
    try:
        async with (
            api_server(manager, loopback_settings, port=0, api_settings=api_settings) as url,
            httpx.AsyncClient(
                base_url=url, timeout=10, headers=local_admin(loopback_settings)
            ) as http,
            browser(tmp_path) as (page, errors, escaped),
        ):
            agent_id = await create_running(http)
            await page.goto(signed_in(url, loopback_settings))
            row = page.locator(f"#agent-{agent_id}")
            chat = page.locator("section.chat")
            notice = page.locator("#chat-state")
            send = page.locator("#chat-send")

            async def chat_text() -> str:
                return str(await chat.inner_text())

            await expect(row.locator(".badge")).to_have_text("running")
            await expect(chat.locator(".empty")).to_have_text("No messages yet.")
            await expect(notice).to_be_hidden()
            await expect(send).to_be_enabled()
            assert not START_HINT.search(await chat_text()), await chat_text()

            # Stopped from the page: the row, the agent list and the chat all say so.
            await page.get_by_role("button", name="Stop Pilot").click()
            await expect(page.locator("#agents-status")).to_have_text("Pilot stopped.")
            await expect(row.locator(".badge")).to_have_text("stopped")
            await expect(notice).to_have_text("Pilot is stopped. Start it to chat.")
            await expect(page.locator("#chat-agent option")).to_have_text("Pilot (stopped)")
            await expect(send).to_be_disabled()
            await page.get_by_label("Message", exact=True).fill("anyone there?")
            await page.get_by_label("Message", exact=True).press("Enter")
            await expect(page.get_by_label("Message", exact=True)).to_have_value("anyone there?")
            await expect(chat.locator(".msg")).to_have_count(0)

            # Started elsewhere (the API), then Refresh: the hint goes.
            assert (await http.post(f"/agents/{agent_id}/start")).json()["running"] is True
            await page.get_by_role("button", name="Refresh").click()
            await expect(row.locator(".badge")).to_have_text("running")
            await expect(notice).to_be_hidden()
            await expect(send).to_be_enabled()
            assert not START_HINT.search(await chat_text()), await chat_text()

            # Stopped here but started again by another process (its desired state, which this
            # process's follower would apply): no "start" advice either.
            await page.get_by_role("button", name="Stop Pilot").click()
            await expect(notice).to_have_text("Pilot is stopped. Start it to chat.")
            fleet = await manager.fleet()
            await fleet.set_desired(agent_id, DesiredState.RUNNING, actor="elsewhere")
            await page.get_by_role("button", name="Refresh").click()
            await expect(row.locator(".badge")).to_have_text("running elsewhere")
            await expect(notice).to_contain_text("runs in another Carrier process")
            await expect(send).to_be_disabled()
            assert not START_HINT.search(await chat_text()), await chat_text()
            assert errors == []
            assert escaped == []
    finally:
        await manager.close()


OVERFLOWING = """(width) => [...document.querySelectorAll("body *")]
  .filter((node) => node.getClientRects().length && node.getBoundingClientRect().right > width + 0.5)
  .map((node) => `${node.tagName.toLowerCase()}#${node.id}.${node.className}`)"""


async def test_console_fits_a_400px_screen(
    make_manager: Callable[..., AgentManager],
    loopback_settings: Settings,
    api_settings: ApiSettings,
    tmp_path: Path,
) -> None:
    """At 400 CSS pixels nothing scrolls sideways, every row button can be clicked and the chat
    works. A screenshot is saved to ``test-artifacts/console-400px.png``."""
    manager = make_manager(loopback_settings)
    width = 400
    try:
        async with (
            api_server(manager, loopback_settings, port=0, api_settings=api_settings) as url,
            httpx.AsyncClient(
                base_url=url, timeout=10, headers=local_admin(loopback_settings)
            ) as http,
            browser(tmp_path, width=width, height=800) as (page, errors, escaped),
        ):
            running = await create_running(http)
            long_name = {"name": "Harbormaster of the Northern Breakwater", "bio": ["Keeps watch."]}
            stopped = (await http.post("/agents", json=long_name)).json()["id"]
            await page.goto(signed_in(url, loopback_settings))
            await expect(page.locator("#agents tbody tr")).to_have_count(2)
            await expect(page.get_by_role("log").locator(".empty")).to_have_text("No messages yet.")

            async def check_fits() -> None:
                scroll_width = await page.evaluate("document.scrollingElement.scrollWidth")
                assert scroll_width <= width
                assert await page.evaluate(OVERFLOWING, width) == []
                buttons = page.locator("#agents tbody button")
                assert await buttons.count() == 6
                for button in await buttons.all():
                    box = await button.bounding_box()
                    assert box is not None
                    assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
                for control in ("#chat-input", "#chat-send", "#chat-agent"):
                    box = await page.locator(control).bounding_box()
                    assert box is not None and box["x"] + box["width"] <= width, control

            await check_fits()

            # The chat works at this width, long unbroken words included.
            word = "tideglass" * 12
            await page.get_by_label("Message", exact=True).fill(f"what is {word}?")
            await page.get_by_role("button", name="Send").click()
            log = page.get_by_role("log")
            await expect(log.locator(".msg.agent .text")).to_have_text(
                f"Ahoy! You said: what is {word}?"
            )
            # The row buttons work: start the second agent from its row.
            await page.get_by_role("button", name="Start Harbormaster").click()
            await expect(page.locator(f"#agent-{stopped} .badge")).to_have_text("running")
            await expect(page.locator(f"#agent-{running} .badge")).to_have_text("running")
            await check_fits()

            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "console-400px.png"), full_page=True)
            assert errors == []
            assert escaped == []
    finally:
        await manager.close()


SSE_CHECK = """async () => {
  const { SseParser } = await import("/console/assets/sse.js");
  const parser = new SseParser();
  const pieces = ["event: chunk\\r", "\\ndata: \\"a", "b\\"\\r\\n\\r\\n: keep-alive\\n\\n",
                  "event: done\\ndata: {\\"x\\": 1}\\ndata: {}\\n", "\\n"];
  return pieces.flatMap((piece) => parser.feed(piece));
}"""


async def test_console_sse_parser_handles_split_lines_and_crlf(
    make_manager: Callable[..., AgentManager],
    loopback_settings: Settings,
    api_settings: ApiSettings,
    tmp_path: Path,
) -> None:
    """The page's own SSE reader: events split anywhere, CRLF, comments, multi-line data."""
    manager = make_manager(loopback_settings)
    try:
        async with (
            api_server(manager, loopback_settings, port=0, api_settings=api_settings) as url,
            browser(tmp_path) as (page, errors, _),
        ):
            await page.goto(signed_in(url, loopback_settings))
            events = await page.evaluate(SSE_CHECK)
            assert events == [
                {"event": "chunk", "data": '"ab"'},
                {"event": "done", "data": '{"x": 1}\n{}'},
            ]
            assert errors == []
    finally:
        await manager.close()


def test_browser_deps_script_is_idempotent_when_chromium_is_present() -> None:
    """``.ci/browser-deps`` does nothing (and needs no network) when Chromium is installed."""
    script = REPO / ".ci" / "browser-deps"
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run([bash, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "already installed" in done.stdout
