"""The console's Instagram and Jobs views in headless Chromium, against a real ``carrier run``
(the API, the console, the Instagram client and the job worker in one process, with the fake
model and the hashing embedder) posting to the loopback fake Graph API through a loopback FTP
server, approval required.

The walk: an upload becomes a draft awaiting approval, shown with its image as the server
converts it for the upload; its caption is edited and it is approved; the fake Graph API
receives the post with the edited caption and the publish history shows it with its permalink,
counted in the account's quota (the fake Graph API's ``content_publishing_limit``). The Jobs view lists the jobs, filters them, shows one's history, cancels the
plan's pending job and runs it again (it drafts a post from the library). An agent's token sees
its agent, is told that cancel needs the admin token, and rejects that draft itself. Both views fit a 400 px screen. Screenshots go to
``test-artifacts/console-instagram*.png`` and ``console-jobs*.png``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aioftp
import httpx

from carrier.character import Character
from clients.instagram.fake import FakeGraphAPI
from tests.api.test_console_browser import ARTIFACTS, OVERFLOWING, browser, expect
from tests.clients.instagram.helpers import FTP_PASSWORD, FTP_USER, TOKEN, make_image
from tests.deploy.procs import ADMIN_TOKEN, CarrierProcess, base_env, free_port

CAPTION = "Harbour lights at dusk."
EDITED = "Harbour lights at dusk, edited by a human."
PLAN_CRON = "0 9 1 1 *"  # once a year: its job stays pending through the test


@asynccontextmanager
async def ftp_server(root: Path) -> AsyncIterator[int]:
    server = aioftp.Server([aioftp.User(FTP_USER, FTP_PASSWORD, base_path=root)])
    await server.start("127.0.0.1", 0)
    try:
        yield int(server.address[1])
    finally:
        await server.close()


def character(fake: FakeGraphAPI, ftp_port: int) -> dict[str, Any]:
    return {
        "name": "Harbour",
        "bio": ["Harbour photographs the harbour."],
        "clients": ["instagram"],
        "clientConfig": {
            "instagram": {
                "publisher": "graph",
                "igUserId": fake.ig_user_id,
                "graphBaseUrl": fake.url,
                "dailyLimit": 25,
                "ftp": {
                    "host": "127.0.0.1",
                    "port": ftp_port,
                    "user": FTP_USER,
                    "directory": "/",
                    "baseUrl": fake.media_url,
                },
                "plan": {
                    "schedule": {"cron": PLAN_CRON},
                    "media": {"library": "library"},
                    "approval": "required",
                },
                "conversations": {"approval": "required"},
            }
        },
    }


EDITED_REPLY = "The north pier, at dusk. Thanks for asking!"


async def until(check: Any, what: str, bound_s: float = 60.0) -> Any:
    """Until ``check()`` returns something true; a bound against hanging, not a measure. Once
    a second: the checks share the admin token's rate (120 a minute) with the page."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    while loop.time() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(1.0)
    raise AssertionError(f"never saw {what}")


async def test_console_instagram_approval_and_jobs_walk(tmp_path: Path) -> None:
    ftp_root, characters, data = tmp_path / "ftp", tmp_path / "characters", tmp_path / "data"
    for folder in (ftp_root, characters / "library", data):
        folder.mkdir(parents=True)
    make_image(characters / "library" / "pier.jpg")
    upload = make_image(tmp_path / "dusk.png", size=(1600, 600), fmt="PNG")  # wider than 1.91:1
    port = free_port()
    with FakeGraphAPI(token=TOKEN, static_root=ftp_root) as fake:
        async with ftp_server(ftp_root) as ftp_port:
            persona = character(fake, ftp_port)
            (characters / "harbour.json").write_text(json.dumps(persona), encoding="utf-8")
            agent_id = Character.model_validate(persona).agent_id
            env = base_env(
                data,
                CARRIER_CHARACTERS_DIR=str(characters),
                INSTAGRAM_ACCESS_TOKEN=TOKEN,
                INSTAGRAM_APP_SECRET=fake.webhooks.app_secret,
                FTP_PASSWORD=FTP_PASSWORD,
                # The page and the test's own checks share the admin token: room for both.
                CARRIER_RATE_PER_MINUTE="600",
            )
            proc = CarrierProcess.start("run", "--port", str(port), env=env)
            try:
                await proc.wait_for("(Ctrl-C to stop)")
                assert proc.has("started instagram"), proc.output[-3000:]
                url = f"http://127.0.0.1:{port}"
                admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
                async with httpx.AsyncClient(base_url=url, timeout=10, headers=admin) as http:
                    await walk(http, url, agent_id, upload, fake, tmp_path)
            finally:
                proc.stop()


async def walk(
    http: httpx.AsyncClient,
    url: str,
    agent_id: str,
    upload: Path,
    fake: FakeGraphAPI,
    tmp_path: Path,
) -> None:
    content = await asyncio.to_thread(upload.read_bytes)
    sent = await http.post(
        f"/{agent_id}/media",
        files={"file": ("dusk.png", content, "image/png")},
        data={"caption": CAPTION},
    )
    assert sent.status_code == 202, sent.text

    async def drafts() -> list[dict[str, Any]]:
        listed = await http.get("/jobs", params={"state": "awaiting_approval"})
        return list(listed.json()) if listed.status_code == 200 else []

    [draft] = await until(drafts, "the upload's draft awaiting approval")

    async with browser(tmp_path) as (page, errors, escaped):
        await page.goto(f"{url}/console#token={ADMIN_TOKEN}")
        await page.get_by_role("link", name="Instagram").click()
        section = page.locator(f"#ig-{agent_id}")
        await expect(section.locator(".ig-plan")).to_contain_text("approval required")
        await expect(section.locator(".ig-runs")).to_contain_text(f"cron '{PLAN_CRON}' (UTC)")
        # Instagram's own count (the fake Graph API's content_publishing_limit), and Carrier's.
        quota = section.locator(".ig-quota")
        await expect(quota).to_have_text("0 of 50 posts in the last 24 h (Instagram's count)")
        await expect(section.locator(".ig-quota-note")).to_contain_text(
            "Carrier published 0 of its own limit of 25"
        )
        card = section.locator(f"#draft-{draft['id']}")
        image = card.locator("img")
        await expect(image).to_have_count(1)
        # wider than Instagram takes: converted by the server as it will be uploaded, padded to
        # 1.91:1 (the default) and resized to 1440 px
        assert await image.evaluate("img => img.complete && img.naturalWidth") == 1440
        caption_line = card.locator("figcaption")
        await expect(caption_line).to_contain_text("as uploaded, 1440\N{MULTIPLICATION SIGN}754")
        await expect(caption_line).to_contain_text("padded aspect ratio 2.67:1 to 1.91:1")
        caption = card.get_by_label("Caption")
        await expect(caption).to_have_value(CAPTION)
        await page.screenshot(path=str(ARTIFACTS / "console-instagram-draft.png"), full_page=True)

        await caption.fill(EDITED)
        await card.get_by_role("button", name="Approve").click()
        await expect(page.locator("#ig-notice")).to_contain_text("with the edited caption")

        async def published() -> list[dict[str, Any]]:
            return [m for m in fake.published if m.get("caption") == EDITED]

        [post] = await until(published, "the post on the fake Graph API")
        assert post["caption"] == EDITED
        await until(
            lambda: _published_job(http, agent_id), "the publish job succeeded with a permalink"
        )
        await page.get_by_role("button", name="Refresh").click()
        row = section.locator(".ig-history tbody tr").first
        await expect(row.locator(".ig-caption")).to_have_text(EDITED)
        await expect(row.locator(".badge")).to_have_text("succeeded")
        await expect(row.get_by_role("link", name="permalink")).to_have_attribute(
            "href", post["permalink"]
        )
        await expect(quota).to_have_text("1 of 50 posts in the last 24 h (Instagram's count)")
        await expect(section.locator(".ig-quota-note")).to_contain_text(
            "Carrier published 1 of its own limit of 25"
        )
        await expect(section).to_contain_text("No draft waits for approval.")

        # A comment comes by webhook; its reply waits for approval; edited and approved here.
        fake.webhooks.url = f"{url}/webhooks/instagram"
        commented = fake.conversations.person_comments(
            fake.add_media("the pier at dusk"), "which pier is this?", user_id="u1", username="ana"
        )
        assert await fake.webhooks.deliver(fake.webhooks.comment(commented)) == [200]

        async def held() -> list[dict[str, Any]]:
            listed = await http.get(
                "/jobs", params={"kind": "instagram.inbound", "state": "awaiting_approval"}
            )
            return list(listed.json()) if listed.status_code == 200 else []

        [held_job] = await until(held, "the reply held for approval")
        await page.get_by_role("button", name="Refresh").click()
        reply_card = section.locator(f"#reply-{held_job['id']}")
        await expect(reply_card.locator(".ig-answers")).to_have_text("which pier is this?")
        await reply_card.get_by_label("Reply").fill(EDITED_REPLY)
        await reply_card.get_by_role("button", name="Approve").click()
        await expect(page.locator("#ig-notice")).to_contain_text("with your edit")

        async def answered() -> list[str]:
            return [r.text for r in fake.conversations.replies_to(commented.id)]

        assert await until(answered, "the approved reply on the fake Graph API") == [EDITED_REPLY]
        await expect(section).to_contain_text("No reply waits for approval.")
        await page.screenshot(path=str(ARTIFACTS / "console-instagram.png"), full_page=True)

        # Jobs: every job, then filtered; one's history; the plan's pending job cancelled, retried.
        await page.get_by_role("link", name="Jobs").click()
        rows = page.locator("#jobs-list tbody tr")
        await expect(page.locator("#jobs-count")).to_contain_text("newest first")
        kinds = set(await page.locator("#jobs-list .job-kind").all_text_contents())
        assert {"instagram.post", "instagram.publish"} <= kinds
        await page.locator("#jobs-kind").fill("instagram.publish")
        await page.get_by_role("button", name="Filter").click()
        await expect(rows).to_have_count(1)
        await rows.first.get_by_role("button", name="History").click()
        detail = page.locator("#job-detail")
        await expect(detail).to_contain_text("History of instagram.publish")
        await expect(detail.locator(".job-event").last).to_contain_text("succeeded")
        await expect(detail.locator(".job-facts")).to_contain_text(post["permalink"])

        await page.locator("#jobs-kind").fill("instagram.post")
        await page.locator("#jobs-state").select_option("pending")
        await page.get_by_role("button", name="Filter").click()
        await expect(rows).to_have_count(1)  # the plan's next slot
        await expect(page.locator("#jobs-schedules")).to_contain_text(f"cron '{PLAN_CRON}'")
        await rows.first.get_by_role("button", name="Cancel").click()
        await expect(page.locator("#jobs-notice")).to_contain_text("cancelled")
        await expect(rows).to_have_count(0)
        await page.locator("#jobs-state").select_option("cancelled")
        await page.get_by_role("button", name="Filter").click()
        await expect(rows).to_have_count(1)
        plan_job = (await rows.first.get_attribute("id") or "").removeprefix("job-")
        await rows.first.get_by_role("button", name="Retry").click()
        await expect(page.locator("#jobs-notice")).to_contain_text("queued again")
        # run again at once: the plan takes the library's file and drafts a post (or fails)
        await expect(detail.locator(".job-event.s-cancelled")).to_have_count(1)
        await expect(detail.locator(".job-event.s-pending")).not_to_have_count(0)
        settled = await until(lambda: _settled(http, plan_job), "the retried job settling")
        await page.screenshot(path=str(ARTIFACTS / "console-jobs.png"), full_page=True)

        # Narrow: nothing sideways on either view.
        await page.set_viewport_size({"width": 400, "height": 900})
        for name in ("Instagram", "Jobs"):
            await page.get_by_role("link", name=name).click()
            await page.wait_for_load_state("networkidle")
            assert await page.evaluate(OVERFLOWING, 400) == [], name
        await page.screenshot(path=str(ARTIFACTS / "console-jobs-400px.png"), full_page=True)
        assert errors == [] and escaped == []

    # The retried plan job drafted a post from the library (the fake model wrote its caption).
    assert settled == "awaiting_approval"

    # An agent's token: its agent's jobs and Instagram; cancel is the admin's, its drafts its own.
    created = await http.post("/tokens", json={"name": "harbour-ops", "agent_id": agent_id})
    narrowed = created.json()["token"]
    async with browser(tmp_path / "narrowed") as (page, errors, escaped):
        await page.goto(f"{url}/console#token={narrowed}")
        await page.get_by_role("link", name="Jobs").click()
        await expect(page.locator("#jobs-agent option")).to_have_count(2)  # any, and its agent
        await page.locator("#jobs-kind").fill("instagram.post")
        await page.get_by_role("button", name="Filter").click()
        mine = page.locator(f"#job-{plan_job}")
        await expect(mine.locator(".badge")).to_have_text("awaiting approval")
        await mine.get_by_role("button", name="Cancel").click()
        await expect(page.locator("#jobs-notice")).to_contain_text("needs the admin token")
        assert (await http.get(f"/jobs/{plan_job}")).json()["state"] == "awaiting_approval"
        await page.screenshot(path=str(ARTIFACTS / "console-jobs-agent-token.png"), full_page=True)

        await page.get_by_role("link", name="Instagram").click()
        section = page.locator(f"#ig-{agent_id}")
        await expect(section.locator(".ig-history tbody tr")).to_have_count(1)
        card = section.locator(f"#draft-{plan_job}")
        await expect(card.locator("figcaption")).to_have_text(  # square: sent as it is
            "pier.jpg · as uploaded, 1080\N{MULTIPLICATION SIGN}1080 · unchanged"
        )
        await card.get_by_role("button", name="Reject").click()
        await expect(page.locator("#ig-notice")).to_contain_text("Rejected Harbour's draft")
        await expect(section).to_contain_text("No draft waits for approval.")
        assert (await http.get(f"/jobs/{plan_job}")).json()["state"] == "cancelled"
        assert errors == [] and escaped == []


async def _published_job(http: httpx.AsyncClient, agent_id: str) -> bool:
    listed = await http.get(
        "/jobs", params={"agent_id": agent_id, "kind": "instagram.publish", "state": "succeeded"}
    )
    if listed.status_code != 200:  # 429: the page and the test share the token's rate
        return False
    return any((j.get("result") or {}).get("permalink") for j in listed.json())


async def _settled(http: httpx.AsyncClient, job_id: str) -> str | None:
    """The job's state once no worker holds it (awaiting approval, or ended)."""
    read = await http.get(f"/jobs/{job_id}")
    if read.status_code == 429:  # the page and the test share the admin token's rate
        return None
    state = str(read.json()["state"])
    return None if state in ("pending", "claimed", "running") else state
