"""The persona editor, whole, in headless Chromium against a real ``carrier serve`` (the fake
model and the hashing embedder: :mod:`tests.deploy._carrier`), one server for the module.

A persona made in the form with a model, fallbacks, a system prompt, a template, knowledge, post
examples, a client and secrets: the client's options refused at their path, then fixed; the
secrets shown set or unset and never their references or values, a literal one refused at its
field; a ``carrier validate`` warning shown next to its field while the save goes through;
after a reload everything is there. Then the form at 400 CSS pixels, walked by keyboard.
Screenshots go to ``test-artifacts/console-editor-*.png``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_console_browser import ARTIFACTS, CHROMIUM, OVERFLOWING, browser, expect
from tests.deploy.procs import ADMIN_TOKEN, CarrierProcess, base_env, free_port

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (run .ci/browser-deps)"
)

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MODEL_KEY = "editor-walk-model-key-value-0042"
"""The value of EDITOR_MODEL_KEY in the server's environment: never on the page."""
LITERAL = "sk-proj-" + "Lw4Qz8Nt2Vb6Xr1Mk9Jd3Hs7" * 2
HIDDEN = ("KEEPER_DISCORD_TOKEN", "EDITOR_MODEL_KEY", MODEL_KEY, LITERAL)
"""What the page must never show after a save: the references, the value, a refused literal."""

# Every text on the page, the controls' values included (an input's value is no attribute).
PAGE_TEXT = """() => document.body.innerText + "\\n" +
  [...document.querySelectorAll("input, textarea")].map((c) => c.value).join("\\n")"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One ``carrier serve`` for the module; EDITOR_MODEL_KEY is set in its environment,
    KEEPER_DISCORD_TOKEN is not."""
    env = base_env(
        tmp_path_factory.mktemp("editor") / "data",
        EDITOR_MODEL_KEY=MODEL_KEY,
        CARRIER_RATE_PER_MINUTE="6000",
        CARRIER_RATE_BURST="1000",
    )
    port = free_port()
    server = CarrierProcess.start("serve", "--port", str(port), env=env)
    try:
        asyncio.run(server.wait_for("console on http", bound_s=60))
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
    for hidden in (MODEL_KEY, LITERAL):
        assert hidden not in server.output, "a secret reached the server's output"


# The focused control's id, or "summary:<section>" for a section's summary; and whether that
# section is folded.
FOCUSED = """() => {
  const node = document.activeElement;
  const section = node.tagName === "SUMMARY" ? node.closest("details") : null;
  return [section ? `summary:${section.id}` : node.id || node.tagName, Boolean(section && !section.open)];
}"""


async def open_section(page: Any, name: str) -> None:
    details = page.locator(f"#sec-{name}")
    if await details.get_attribute("open") is None:
        await details.locator("summary").click()
    await expect(details).to_have_attribute("open", "")


async def secret_row(page: Any, name: str) -> Any:
    return page.locator("#secret-rows li", has=page.locator("code", has_text=name))


async def test_console_editor_covers_the_whole_persona(served: str, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    async with (
        httpx.AsyncClient(base_url=served, headers=ADMIN, timeout=20) as http,
        browser(tmp_path) as (page, errors, escaped),
    ):
        await page.goto(f"{served}/console#token={ADMIN_TOKEN}")
        await expect(page.locator("#token-state")).to_have_text("Token set for this tab.")
        form = page.locator("#pane-form")
        await form.get_by_label("Name", exact=True).fill("Keeper")
        await page.locator("#f-bio").fill("Keeper tends the lighthouse on the point.")

        await open_section(page, "model")
        await page.locator("#f-model").fill("openai/gpt-4o-mini")
        await page.locator("#f-fallbacks").fill("anthropic/claude-3-5-haiku\nopenai/gpt-4o")
        await page.locator("#f-provider").fill("opnai")  # a typo carrier validate warns of

        await open_section(page, "prompt")
        await page.locator("#f-system").fill("You are Keeper. Speak of the sea and the light.")
        await page.get_by_role("button", name="Add template").click()
        template = page.locator("#template-rows li").first
        await template.get_by_label("Template name").fill("shouldRespondTemplate")
        await template.get_by_label("Template text").fill("Answer when {{agentName}} is named.")

        await open_section(page, "knowledge")
        await page.locator("#f-knowledge").fill(
            "The lamp is lit at dusk.\n\nThe keeper's cat is called Moss."
        )
        await page.locator("#f-post-examples").fill(
            "Dusk again: the lamp is lit.\n\nFog tonight; the horn sounds every minute."
        )

        # The installed clients are offered; Discord's options with a mistake.
        await open_section(page, "clients")
        await expect(page.get_by_label("Run on instagram")).not_to_be_checked()
        await page.get_by_label("Run on discord").check()
        options = page.get_by_label("discord options")
        await options.fill('{"maxMessageLength": 50, "allowedChannels": ["lamp-room"]}')

        await open_section(page, "secrets")
        for name, ref in (
            ("DISCORD_API_TOKEN", "$KEEPER_DISCORD_TOKEN"),
            ("OPENAI_API_KEY", "$EDITOR_MODEL_KEY"),
        ):
            await page.get_by_role("button", name="Add secret").click()
            await page.get_by_label("New secret's name").last.fill(name)
            await page.get_by_label("Its reference").last.fill(ref)

        # Refused: the problem at its path, under the client's options; nothing stored.
        await page.get_by_role("button", name="Create persona").click()
        error = page.locator(f"#{await options.get_attribute('id')}-error")
        await expect(error).to_contain_text("clientConfig.discord.maxMessageLength")
        await expect(error).to_contain_text("greater than or equal to 100")
        await expect(options).to_have_attribute("aria-invalid", "true")
        await expect(options).to_be_focused()
        assert "Keeper" not in [a["name"] for a in (await http.get("/agents")).json()]
        await page.screenshot(path=str(ARTIFACTS / "console-editor-problem.png"), full_page=True)

        # Fixed, it saves; the warning is shown next to its field, and the save went through.
        await options.fill('{"maxMessageLength": 1500, "allowedChannels": ["lamp-room"]}')
        await page.get_by_role("button", name="Create persona").click()
        status = page.locator("#editor-status")
        await expect(status).to_have_text("Keeper created. 1 warning: shown next to the fields.")
        await expect(error).to_have_count(0)
        warning = page.locator("#f-provider-warning")
        await expect(warning).to_contain_text("modelProvider")
        await expect(warning).to_contain_text("did you mean 'openai'?")
        await expect(page.locator("#f-provider")).not_to_have_attribute("aria-invalid", "true")

        agents = [a for a in (await http.get("/agents")).json() if a["name"] == "Keeper"]
        assert len(agents) == 1
        agent_id = agents[0]["id"]
        assert agents[0]["secrets"] == {"DISCORD_API_TOKEN": "unset", "OPENAI_API_KEY": "set"}
        character = agents[0]["character"]
        assert character["settings"]["model"] == "openai/gpt-4o-mini"
        assert character["settings"]["modelFallbacks"] == [
            "anthropic/claude-3-5-haiku",
            "openai/gpt-4o",
        ]
        assert character["modelProvider"] == "opnai"
        assert character["system"] == "You are Keeper. Speak of the sea and the light."
        assert character["templates"] == {
            "shouldRespondTemplate": "Answer when {{agentName}} is named."
        }
        assert character["knowledge"] == [
            "The lamp is lit at dusk.",
            "The keeper's cat is called Moss.",
        ]
        assert character["postExamples"] == [
            "Dusk again: the lamp is lit.",
            "Fog tonight; the horn sounds every minute.",
        ]
        assert character["clients"] == ["discord"]
        assert character["clientConfig"] == {
            "discord": {"maxMessageLength": 1500, "allowedChannels": ["lamp-room"]}
        }

        # The secrets: set or unset, never a reference or a value.
        for name, state in (("DISCORD_API_TOKEN", "unset"), ("OPENAI_API_KEY", "set")):
            await expect((await secret_row(page, name)).locator(".badge")).to_have_text(state)
        await expect(page.locator("#sum-secrets")).to_have_text("2 named, 1 unset")
        text = await page.evaluate(PAGE_TEXT)
        assert not [h for h in HIDDEN if h in text]

        # A literal secret is refused at its field, with what to write instead.
        reference = page.get_by_label("New reference for OPENAI_API_KEY")
        await reference.fill(LITERAL)
        await page.get_by_role("button", name="Save changes").click()
        refused = page.locator(f"#{await reference.get_attribute('id')}-error")
        await expect(refused).to_contain_text("secrets.OPENAI_API_KEY")
        await expect(refused).to_contain_text('write "$OPENAI_API_KEY" here')
        await reference.fill("")  # empty: the stored reference is kept

        # After a reload, everything is there as saved.
        await page.reload()
        await page.get_by_role("button", name="Edit Keeper").click()
        await expect(page.locator("#editor-heading")).to_have_text("Edit Keeper")
        await expect(page.locator("#f-model")).to_have_value("openai/gpt-4o-mini")
        await expect(page.locator("#f-fallbacks")).to_have_value(
            "anthropic/claude-3-5-haiku\nopenai/gpt-4o"
        )
        await expect(page.locator("#f-system")).to_have_value(character["system"])
        template = page.locator("#template-rows li")
        await expect(template).to_have_count(1)
        await expect(template.get_by_label("Template name")).to_have_value("shouldRespondTemplate")
        await expect(template.get_by_label("Template text")).to_have_value(
            "Answer when {{agentName}} is named."
        )
        await expect(page.locator("#f-knowledge")).to_have_value(
            "The lamp is lit at dusk.\n\nThe keeper's cat is called Moss."
        )
        await expect(page.locator("#f-post-examples")).to_have_value(
            "Dusk again: the lamp is lit.\n\nFog tonight; the horn sounds every minute."
        )
        await expect(page.get_by_label("Run on discord")).to_be_checked()
        await expect(page.get_by_label("discord options")).to_have_value(
            '{\n  "maxMessageLength": 1500,\n  "allowedChannels": [\n    "lamp-room"\n  ]\n}'
        )
        await expect(page.locator("#sum-clients")).to_have_text("discord")
        for name, state in (("DISCORD_API_TOKEN", "unset"), ("OPENAI_API_KEY", "set")):
            await expect((await secret_row(page, name)).locator(".badge")).to_have_text(state)
        # The warning is shown on opening too, its section unfolded.
        await expect(page.locator("#f-provider-warning")).to_contain_text("did you mean")
        await expect(page.locator("#sec-model")).to_have_attribute("open", "")
        await expect(status).to_have_text("1 warning: shown next to the fields.")
        text = await page.evaluate(PAGE_TEXT)
        assert not [h for h in HIDDEN if h in text]
        await page.screenshot(path=str(ARTIFACTS / "console-editor.png"), full_page=True)

        # Check, then save: the warning is gone; the secrets' references were kept.
        await page.locator("#f-provider").fill("openai")
        await page.get_by_role("button", name="Check", exact=True).click()
        await expect(status).to_have_text("No problems: a save would take it.")
        await expect(page.locator("#f-provider-warning")).to_have_count(0)
        await page.get_by_role("button", name="Save changes").click()
        await expect(status).to_have_text("Keeper saved.")
        saved = (await http.get(f"/agents/{agent_id}")).json()
        assert saved["character"]["modelProvider"] == "openai"
        assert saved["secrets"] == {"DISCORD_API_TOKEN": "unset", "OPENAI_API_KEY": "set"}
        assert saved["revision"] == 2  # the refused literal stored nothing

        # Clear a secret (stored as unset), then name its variable again.
        await open_section(page, "secrets")
        await page.get_by_role("button", name="Clear OPENAI_API_KEY").click()
        await expect(page.get_by_label("New reference for OPENAI_API_KEY")).to_be_disabled()
        await page.get_by_role("button", name="Save changes").click()
        await expect(status).to_have_text("Keeper saved.")
        openai = await secret_row(page, "OPENAI_API_KEY")
        await expect(openai.locator(".badge")).to_have_text("unset")
        await page.get_by_label("New reference for OPENAI_API_KEY").fill("$EDITOR_MODEL_KEY")
        await page.get_by_role("button", name="Save changes").click()
        await expect(status).to_have_text("Keeper saved.")
        await expect(openai.locator(".badge")).to_have_text("set")
        assert (await http.get(f"/agents/{agent_id}")).json()["revision"] == 4
        text = await page.evaluate(PAGE_TEXT)
        assert not [h for h in HIDDEN if h in text]

        # The raw editor: YAML whose value a comment cuts short is saved, with the warning.
        await page.get_by_role("button", name="New persona").click()
        await page.get_by_role("tab", name="Raw YAML / JSON").click()
        await page.get_by_label("Character file").fill(
            "name: Second Keeper\nbio:\n  - Keeps lamp #2 on the point.\n"
        )
        await page.locator("#raw-save").click()
        await expect(status).to_have_text(
            "Second Keeper created. 1 warning: shown next to the fields."
        )
        await expect(page.locator("#raw-warnings")).to_contain_text("bio.0")
        await expect(page.locator("#raw-warnings")).to_contain_text("as a comment")
        assert errors == []
        assert escaped == []


async def test_console_editor_by_keyboard_at_400px(served: str, tmp_path: Path) -> None:
    """Every section of the form opens and every control is reached with the keyboard, and
    nothing scrolls sideways at 400 CSS pixels with all of it open and filled."""
    width = 400
    character = {
        "name": "Narrow",
        "bio": ["Fits on a phone."],
        "settings": {"model": "openai/gpt-4o-mini", "modelFallbacks": ["openai/gpt-4o"]},
        "templates": {"messageHandlerTemplate": "You are {{agentName}}. " * 8},
        "clients": ["discord"],
        "clientConfig": {"discord": {"allowedChannels": ["a-rather-long-channel-name"] * 3}},
        "secrets": {"OPENAI_API_KEY": "$EDITOR_MODEL_KEY_WITH_A_LONG_NAME"},
    }
    async with (
        httpx.AsyncClient(base_url=served, headers=ADMIN, timeout=20) as http,
        browser(tmp_path, width=width, height=800) as (page, errors, escaped),
    ):
        made = await http.post("/agents", json=character)
        assert made.status_code == 201, made.text
        await page.goto(f"{served}/console#token={ADMIN_TOKEN}")
        await page.get_by_role("button", name="Edit Narrow").click()
        await expect(page.locator("#f-name")).to_be_focused()

        # Tab through the form: each folded section opens from the keyboard.
        reached: list[str] = []
        for _ in range(120):
            await page.keyboard.press("Tab")
            focused, folded = await page.evaluate(FOCUSED)
            if folded:
                await page.keyboard.press("Enter")
            reached.append(focused)
            if focused == "form-save":
                break
        assert reached[-1] == "form-save", reached
        for section in ("model", "prompt", "knowledge", "clients", "secrets"):
            assert f"summary:sec-{section}" in reached
            await expect(page.locator(f"#sec-{section}")).to_have_attribute("open", "")
        for control in (
            "f-model",
            "f-fallbacks",
            "f-provider",
            "f-system",
            "template-add",
            "f-knowledge",
            "f-knowledge-files",
            "f-post-examples",
            "secret-add",
            "form-check",
        ):
            assert control in reached, control
        assert any(r.startswith("tpl-") for r in reached)
        assert any(r.startswith("cl-") and r.endswith("-config") for r in reached)
        assert any(r.startswith("sec-") and r.endswith("-ref") for r in reached)

        scroll_width = await page.evaluate("document.scrollingElement.scrollWidth")
        assert scroll_width <= width
        assert await page.evaluate(OVERFLOWING, width) == []
        await page.locator("#editor").screenshot(path=str(ARTIFACTS / "console-editor-400px.png"))
        assert errors == []
        assert escaped == []
