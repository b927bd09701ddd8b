"""A real ``carrier serve`` (the command, in its own process, on SQLite and on MongoDB) keeps
the time series: turns answered through its API are counted, written on SIGTERM when the flush
interval has not come, and read back through ``GET /metrics/series``."""

from __future__ import annotations

import httpx

from carrier.series import Row, SeriesRecorder, Step
from tests.deploy.procs import ADMIN_TOKEN, CarrierProcess, base_env, free_port
from tests.series.conftest import SeriesFactory


async def test_carrier_serve_counts_turns_and_writes_them_on_stop(
    series_factory: SeriesFactory,
) -> None:
    env = base_env(
        series_factory.data,
        mongodb_uri=series_factory.settings_env().get("CARRIER_MONGODB_URI"),
        CARRIER_SERIES_FLUSH_SECONDS="3600",  # only the stop writes: nothing depends on timing
    )
    port = free_port()
    web = CarrierProcess.start("serve", "--port", str(port), env=env)
    try:
        await web.wait_for("/console")
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30
        ) as http:
            created = await http.post("/agents", json={"name": "Pilot", "bio": ["flies"]})
            agent_id = created.json()["id"]
            assert (await http.post(f"/agents/{agent_id}/start")).status_code == 200
            for text in ("one", "two"):
                sent = await http.post(f"/{agent_id}/message", json={"text": text})
                assert sent.json()["reply"] == f"re: {text}", sent.text
            series = await http.get("/metrics/series", params={"name": "turns", "step": "day"})
            assert series.status_code == 200
            assert series.json()["lines"] == []  # counted in memory, not written yet
    finally:
        assert web.stop() == 0, web.output[-3000:]

    async with series_factory.new_store() as store:
        now = int(SeriesRecorder(store).clock())
        rows: list[Row] = await store.select(
            Step.DAY, now - 86_400, now + 86_400, names=["turns"], agents=[agent_id]
        )
        assert [r.value for r in rows] == [2]
