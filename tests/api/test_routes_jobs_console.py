"""What the console's Instagram and Jobs views read besides ``/jobs``: the schedules (a posting
plan's) with their next runs, and a draft's image as it would be posted; each within a token's
agent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from carrier.jobs import SQLiteJobStore
from carrier.jobs.schedule import CronSpec, IntervalSpec, OnceSpec, Schedule
from tests.api.conftest import bearer
from tests.api.test_routes_jobs import DRAFT, T0, agents, awaiting, jobs  # noqa: F401 - fixture
from tests.clients.instagram.helpers import make_image


async def test_schedules_listed_with_their_next_runs(
    client: httpx.AsyncClient,
    jobs: SQLiteJobStore,  # noqa: F811 - the fixture imported above
) -> None:
    a, b = await agents(client)
    due = datetime(2025, 6, 3, 9, 0, tzinfo=UTC)
    cron = CronSpec(expr="0 9 * * *", tz="UTC", jitter_s=600)
    await jobs.put_schedule(
        Schedule(name=f"instagram:{a}:plan", kind="instagram.post", spec=cron, agent_id=a)
    )
    assert await jobs.advance_schedule(f"instagram:{a}:plan", expected=None, next_at=due)
    await jobs.put_schedule(
        Schedule(name="digest", kind="digest", spec=IntervalSpec(min_s=3600), agent_id=b)
    )
    once = OnceSpec(at=T0 + timedelta(days=1))
    await jobs.put_schedule(Schedule(name="launch", kind="announce", spec=once, agent_id=b))

    listed = (await client.get("/jobs/schedules")).json()
    assert [s["name"] for s in listed] == ["digest", f"instagram:{a}:plan", "launch"]
    plan = listed[1]
    assert plan["describe"] == "cron '0 9 * * *' (UTC) + up to 10m"
    assert plan["next_at"] == "2025-06-03T09:00:00Z"
    # the soonest each later slot can come: the jitter at its lower bound
    assert plan["upcoming"] == [
        "2025-06-04T09:00:00Z",
        "2025-06-05T09:00:00Z",
        "2025-06-06T09:00:00Z",
    ]
    assert listed[0]["upcoming"] == []  # not queued yet: nothing to count from
    filtered = await client.get("/jobs/schedules", params={"kind": "instagram.post"})
    assert [s["name"] for s in filtered.json()] == [f"instagram:{a}:plan"]

    created = await client.post("/tokens", json={"name": "b-token", "agent_id": b})
    token = bearer(created.json()["token"])
    theirs = await client.get("/jobs/schedules", headers=token)
    assert [s["name"] for s in theirs.json()] == ["digest", "launch"]
    refused = await client.get(f"/jobs/schedules?agent_id={a}", headers=token)
    assert refused.status_code == 403 and "scoped to agent" in refused.json()["message"]


async def test_a_drafts_image_is_served_to_its_agent_only(
    client: httpx.AsyncClient,
    jobs: SQLiteJobStore,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    a, b = await agents(client)
    image = make_image(tmp_path / "lib" / "fog.jpg", size=(1080, 1350))
    video = tmp_path / "lib" / "tide.mp4"
    video.write_bytes(b"\x00" * 64)
    gone = tmp_path / "lib" / "gone.png"
    media = [str(image), str(video), str(gone)]
    draft = await awaiting(jobs, a, {**DRAFT, "media": media})
    plain = await jobs.enqueue("digest", agent_id=a, payload={"n": 1})

    shown = await client.get(f"/jobs/{draft.id}/media/0")
    assert shown.status_code == 200
    assert shown.headers["content-type"] == "image/jpeg"
    assert shown.content == image.read_bytes()
    for index, says in ((1, "not an image"), (2, "is gone"), (3, "no draft media number 3")):
        refused = await client.get(f"/jobs/{draft.id}/media/{index}")
        assert refused.status_code == 404, index
        assert refused.json()["error"] == "no_media" and says in refused.json()["message"]
    assert (await client.get(f"/jobs/{plain.id}/media/0")).status_code == 404
    assert (await client.get(f"/jobs/{draft.id}/media/-1")).status_code == 422

    created = await client.post("/tokens", json={"name": "b-token", "agent_id": b})
    other = bearer(created.json()["token"])
    assert (await client.get(f"/jobs/{draft.id}/media/0", headers=other)).status_code == 403
    created = await client.post("/tokens", json={"name": "a-token", "agent_id": a})
    mine = bearer(created.json()["token"])
    assert (await client.get(f"/jobs/{draft.id}/media/0", headers=mine)).status_code == 200
