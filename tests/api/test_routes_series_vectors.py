"""``GET /metrics/summary``'s vector index per agent (the console's overview chart): what this
process's in-process index holds for each agent it runs, exact search until the ANN index is
ready, and "not loaded here" for an agent that does not run in this process; an agent's token
sees its own agent only. On a real SQLite store with its real vector index (usearch)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.memory.index.manager import VectorIndex
from carrier.memory.sqlite import SQLiteStore
from carrier.series import open_host_series
from carrier.settings import Settings
from tests.api.conftest import CHARACTER, bearer, create_running

ANN_ROWS = 6


@pytest.fixture
async def http(
    make_manager: Callable[..., AgentManager],
    settings: Settings,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
    store: SQLiteStore,
) -> AsyncIterator[httpx.AsyncClient]:
    assert isinstance(store.vectors, VectorIndex)
    store.vectors.ann_rows = ANN_ROWS  # an ANN index after a few turns, not 20,000 rows
    manager = make_manager(settings)
    series = await open_host_series(settings, manager)
    try:
        async with make_client(create_app(manager, settings, api_settings=api_settings)) as c:
            yield c
    finally:
        await manager.close()
        await series.aclose()


async def _vectors(http: httpx.AsyncClient, **kw: Any) -> dict[str, dict[str, Any]]:
    summary = await http.get("/metrics/summary", **kw)
    assert summary.status_code == 200, summary.text
    return {a["agent_id"]: a["vectors"] for a in summary.json()["agents"]}


async def test_summary_says_what_the_vector_index_holds_per_agent(
    http: httpx.AsyncClient, store: SQLiteStore
) -> None:
    pilot = await create_running(http)
    idle = (await http.post("/agents", json={**CHARACTER, "name": "Idle"})).json()["id"]
    sent = await http.post(f"/{pilot}/message", json={"text": "hello there"})
    assert sent.status_code == 200, sent.text

    vectors = await _vectors(http)
    held = [e for e in store.vector_stats() if e["agent_id"] == pilot and e["set"] == "main"]
    [main] = held
    mine = vectors[pilot]
    assert mine["state"] == "exact" and mine["ann_rows"] == ANN_ROWS
    # What the index holds now (it takes the store's changes in before each search).
    assert mine["rows"] == main["rows"] < ANN_ROWS
    assert mine["bytes"] == sum(
        int(str(e["bytes"])) + int(str(e["ann_bytes"]))
        for e in store.vector_stats()
        if e["agent_id"] == pilot
    )
    assert mine["note"] == f"exact search; an ANN index is made at {ANN_ROWS:,} rows"
    assert vectors[idle] == {
        "state": "not_loaded",
        "rows": None,
        "bytes": 0,
        "ann_rows": ANN_ROWS,
        "note": "not loaded here: the index lives in the process that runs it",
    }

    for text in ("how high do we fly?", "and the wind?", "clear skies?"):
        sent = await http.post(f"/{pilot}/message", json={"text": text})
        assert sent.status_code == 200, sent.text
    # Until its ANN index is built: exact meanwhile (building), then ready.
    assert store.vectors is not None
    await store.vectors.prepare(pilot, str(main["model"]), int(str(main["dim"])), wait=True)
    mine = (await _vectors(http))[pilot]
    assert mine["rows"] >= ANN_ROWS
    assert (mine["state"], mine["note"]) == ("ann", "ANN index ready")

    # An agent's token: its own agent's index, no other.
    made = await http.post("/tokens", json={"name": "pilot-ops", "agent_id": pilot})
    theirs = await _vectors(http, headers=bearer(made.json()["token"]))
    assert list(theirs) == [pilot] and theirs[pilot]["state"] == "ann"
