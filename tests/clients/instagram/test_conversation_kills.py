"""Real ``carrier`` processes answering Instagram comments.

A ``carrier run`` killed with SIGKILL between "reply intended" and "reply recorded sent": the fake
Graph API delivers a signed comment webhook to the process's API, the worker claims the reply
and sends it, the fake takes the reply and holds its answer, and the process is killed then.
Started again, the process takes the job over, reads the comment's replies, finds its own and
sends nothing more: the comment has exactly one reply, recorded ``sent``.

And a web process (``carrier serve --no-clients``) that only stores a delivery, for the worker
(``carrier run --no-api``) to answer."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
import pytest

from carrier.jobs import JobState, SQLiteJobStore
from carrier.memory.sqlite import SQLiteStore
from carrier.types import MemoryKind, MemoryStatus
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.inbound.webhook import INBOUND_JOB_KIND
from tests.deploy.procs import ADMIN_TOKEN, CarrierProcess, base_env, free_port
from tests.mongo_servers import MongoServer

APP_SECRET = "meta-app-secret-for-the-kill-test"
TOKEN = "EAAG-kill-test-token"


def character(fake: FakeGraphAPI) -> dict[str, object]:
    return {
        "name": "Lumen",
        "bio": ["Lumen shoots film and travels slowly."],
        "clients": ["instagram"],
        "settings": {
            "secrets": {"INSTAGRAM_ACCESS_TOKEN": "$IG_TOKEN", "FTP_PASSWORD": "$IG_FTP_PASSWORD"}
        },
        "clientConfig": {
            "instagram": {
                "publisher": "graph",
                "igUserId": fake.ig_user_id,
                "graphBaseUrl": fake.url,
                "ftp": {"host": "127.0.0.1", "user": "nobody", "baseUrl": fake.media_url},
            }
        },
    }


async def _until(predicate: object, *, bound_s: float = 90.0) -> None:
    """Poll ``predicate()`` (sync or async) until true; a bound against hanging."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    while True:
        value = predicate()  # type: ignore[operator]
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


async def test_kill_between_reply_intended_and_sent_leaves_exactly_one_reply(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with FakeGraphAPI(token=TOKEN, app_secret=APP_SECRET) as fake:
        path = tmp_path / "lumen.json"
        path.write_text(json.dumps(character(fake)), encoding="utf-8")
        env = base_env(
            data,
            CARRIER_JOB_LEASE_SECONDS="2",
            INSTAGRAM_APP_SECRET=APP_SECRET,
            INSTAGRAM_WEBHOOK_VERIFY_TOKEN="kill-test-verify",
            IG_TOKEN=TOKEN,
            IG_FTP_PASSWORD="unused",
        )
        port = free_port()
        args = ("run", str(path), "--port", str(port))
        first = CarrierProcess.start(*args, env=env, name="first")
        try:
            await first.wait_for("agent API and console on")
            fake.webhooks.url = f"http://127.0.0.1:{port}/webhooks/instagram"
            talk = fake.conversations
            media = fake.add_media("fog came in at six")
            comment = talk.person_comments(
                media, "what film is this?", user_id="u1", username="ana"
            )
            talk.answer_delay_s = 60.0  # the reply takes effect; its answer is held

            async with httpx.AsyncClient(timeout=30) as http:
                statuses = await fake.webhooks.deliver(fake.webhooks.comment(comment), http=http)
            assert statuses == [200]
            await _until(lambda: talk.answering == 1)  # sent, and the worker knows nothing yet
        finally:
            first.kill()
        talk.answer_delay_s = 0.0
        assert len(talk.replies_to(comment.id)) == 1

        second = CarrierProcess.start(*args, env=env, name="second")
        jobs = SQLiteJobStore(path=data / "carrier.db")
        try:
            await second.wait_for("agent API and console on")
            await jobs.open()

            async def done() -> bool:
                found = await jobs.list_jobs(kind=INBOUND_JOB_KIND, limit=None)
                return bool(found) and found[0].state is JobState.SUCCEEDED

            await _until(done)
        finally:
            await jobs.close()
            second.stop()

        [job] = await _jobs(data)
        assert job.crashes == 1 and job.result is not None
        assert job.result["found_on_platform"] == 1 and job.result["replied"] == []
        assert [r.text for r in talk.replies_to(comment.id)] == ["re: what film is this?"]
        assert talk.reply_calls == 1
        async with SQLiteStore(path=data / "carrier.db") as store:
            agents = await store.list_agents()
            memories = await store.get_memories(
                agent_id=agents[0].id, kinds=[MemoryKind.MESSAGE], limit=10
            )
        statuses_by_text = {m.content.text: m.status for m in memories}
        assert statuses_by_text == {
            "what film is this?": MemoryStatus.PROCESSED,
            "re: what film is this?": MemoryStatus.SENT,
        }


async def _jobs(data: Path) -> list:  # type: ignore[type-arg]
    async with SQLiteJobStore(path=data / "carrier.db") as jobs:
        return await jobs.list_jobs(kind=INBOUND_JOB_KIND, limit=None)


@pytest.fixture(params=["sqlite", "mongo"])
def mongodb_uri(request: pytest.FixtureRequest) -> str | None:
    """The store the processes share: a SQLite file, or a database on the MongoDB-compatible
    server the suite starts."""
    if request.param == "sqlite":
        return None
    server: MongoServer = request.getfixturevalue("mongo_compatible_server")
    return server.database_uri(f"ig_{uuid.uuid4().hex[:10]}")


async def test_the_web_process_stores_the_delivery_and_the_worker_answers_it(
    tmp_path: Path, mongodb_uri: str | None
) -> None:
    """``carrier serve --no-clients`` receives the webhook and only enqueues (it runs no job
    worker); ``carrier run --no-api`` runs the Instagram client and answers. On SQLite and on
    MongoDB (the job store, the idempotency keys and the policy's counters on each)."""
    with FakeGraphAPI(token=TOKEN, app_secret=APP_SECRET) as fake:
        path = tmp_path / "lumen.json"
        path.write_text(json.dumps(character(fake)), encoding="utf-8")
        env = base_env(
            tmp_path / "data",
            mongodb_uri=mongodb_uri,
            INSTAGRAM_APP_SECRET=APP_SECRET,
            INSTAGRAM_WEBHOOK_VERIFY_TOKEN="web-worker-verify",
            IG_TOKEN=TOKEN,
            IG_FTP_PASSWORD="unused",
        )
        port = free_port()
        worker = CarrierProcess.start("run", "--no-api", str(path), env=env, name="worker")
        web: CarrierProcess | None = None
        try:
            await worker.wait_for("running (Ctrl-C to stop)")
            web = CarrierProcess.start(
                "serve", "--no-clients", "--port", str(port), env=env, name="web"
            )
            await web.wait_for("agent API and console on")
            fake.webhooks.url = f"http://127.0.0.1:{port}/webhooks/instagram"
            talk = fake.conversations
            media = fake.add_media()
            comment = talk.person_comments(
                media, "what film is this?", user_id="u1", username="ana"
            )
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                timeout=30,
            ) as http:
                payload = fake.webhooks.comment(comment)
                assert await fake.webhooks.deliver(payload, times=2, http=http) == [200, 200]
                await _until(lambda: len(talk.replies_to(comment.id)) == 1)

                async def succeeded() -> bool:
                    found = (await http.get("/jobs", params={"kind": INBOUND_JOB_KIND})).json()
                    return len(found) == 1 and found[0]["state"] == "succeeded"

                await _until(succeeded)
                [job] = (await http.get("/jobs", params={"kind": INBOUND_JOB_KIND})).json()
        finally:
            for proc in (web, worker):
                if proc is not None:
                    proc.stop()
        assert job["agent_id"] is not None  # matched to the agent by the web process
        assert [r.text for r in talk.replies_to(comment.id)] == ["re: what film is this?"]
        assert talk.reply_calls == 1
