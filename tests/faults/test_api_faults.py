"""The real API server (uvicorn on loopback) against a model server injecting the fault mix:
every turn, JSON or streamed, ends in a reply or a clean failure, within a bound of its
deadline, with no exception text for the caller; a healthy fallback serves streams too; no
reply is stored twice."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, api_server
from carrier.llm.failures import FAILURE_NOTICE
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings
from carrier.types import MemoryKind, MemoryStatus
from tests.faults.conftest import exception_text
from tests.faults.fault_server import FaultMix, FaultServer

pytestmark = pytest.mark.filterwarnings(
    "ignore:Item 'summary' on TypedDict class 'ChatCompletionReasoningItem':UserWarning"
)

ADMIN = "admin-token-for-the-fault-suite-0123456789"
TIMEOUT, DEADLINE = 0.5, 4.0


@dataclass
class Turn:
    streamed: bool
    status: int
    seconds: float
    reply: str = ""
    error: dict[str, Any] | None = None
    done: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    """Everything the caller read, for the exception-text check."""


@dataclass
class Api:
    http: httpx.AsyncClient
    agent_id: str
    store: SQLiteStore


@pytest.fixture
async def api(tmp_path: Path, fault_server: FaultServer) -> AsyncIterator[Api]:
    fault_server.hang = 2.0  # longer than an attempt's 0.5 s: a timeout
    settings = load_settings(
        {
            "CARRIER_DATA_DIR": str(tmp_path / "data"),
            "CARRIER_ADMIN_TOKEN": ADMIN,
            "CARRIER_MODEL": "openai/primary",
            "CARRIER_API_BASE": fault_server.base_url,
            "CARRIER_MODEL_TIMEOUT": str(TIMEOUT),
            "CARRIER_TURN_DEADLINE": str(DEADLINE),
            "CARRIER_FACT_INTERVAL": "1000",
        }
    )
    limits = ApiSettings(rate_per_minute=60_000, rate_burst=10_000, token_cache_seconds=0)
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        manager = AgentManager(store=store, embedder=HashEmbedder(), settings=settings, environ={})
        try:
            async with (
                api_server(manager, settings, port=0, api_settings=limits) as url,
                httpx.AsyncClient(
                    base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30
                ) as http,
            ):
                character = {
                    "name": "Harbor",
                    "bio": ["Harbor hosts a game-dev community."],
                    "settings": {"modelFallbacks": ["openai/fallback"]},
                }
                created = await http.post("/agents", json=character)
                assert created.status_code == 201, created.text
                agent_id = created.json()["id"]
                assert (await http.post(f"/agents/{agent_id}/start")).json()["running"]
                yield Api(http, agent_id, store)
        finally:
            await manager.close()


async def _json_turn(api: Api, text: str, user: str) -> Turn:
    started = time.monotonic()
    response = await api.http.post(f"/{api.agent_id}/message", json={"text": text, "user_id": user})
    turn = Turn(False, response.status_code, time.monotonic() - started, text=response.text)
    body = response.json()
    if response.status_code == 200:
        turn.reply, turn.done = body["reply"], body
    else:
        turn.error = body
    return turn


async def _sse_turn(api: Api, text: str, user: str) -> Turn:
    started = time.monotonic()
    events: list[tuple[str, Any]] = []
    raw: list[str] = []
    async with api.http.stream(
        "POST",
        f"/{api.agent_id}/message",
        json={"text": text, "user_id": user},
        headers={"Accept": "text/event-stream"},
    ) as stream:
        event = ""
        async for line in stream.aiter_lines():
            raw.append(line)
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((event, json.loads(line.removeprefix("data: "))))
    turn = Turn(True, stream.status_code, time.monotonic() - started, text="\n".join(raw))
    names = [e for e, _ in events]
    assert names[-1] == "done", names  # always closed by done
    assert set(names[:-1]) <= {"chunk", "error"} and names.count("error") <= 1
    turn.done = events[-1][1]
    turn.reply = "".join(data for e, data in events if e == "chunk")
    errors = [data for e, data in events if e == "error"]
    turn.error = errors[0] if errors else None
    return turn


async def _run(api: Api, count: int, *, every_nth_streamed: int = 3) -> list[Turn]:
    """``count`` turns, four people at a time, every n-th one streamed."""

    async def person(n: int) -> list[Turn]:
        turns = []
        for i in range(n, count, 4):
            send = _sse_turn if i % every_nth_streamed == 0 else _json_turn
            turns.append(await send(api, f"question {i}", f"person-{n}"))
        return turns

    return [t for ts in await asyncio.gather(*(person(n) for n in range(4))) for t in ts]


async def _stored_replies(api: Api) -> Counter[str]:
    """Replies stored per inbound message (a doubled reply shows as 2)."""
    memories = await api.store.get_memories(
        agent_id=api.agent_id, kinds=[MemoryKind.MESSAGE], limit=10_000
    )
    return Counter(m.content.in_reply_to for m in memories if m.content.in_reply_to)


async def test_api_faults_with_a_healthy_fallback_every_turn_is_answered(
    api: Api, fault_server: FaultServer
) -> None:
    fault_server.mixes = {"primary": FaultMix(rate=0.3), "fallback": FaultMix.healthy()}
    turns = await _run(api, 36)
    for turn in turns:
        assert turn.status == 200 and turn.error is None, turn
        assert turn.done["status"] == "processed" and turn.reply.startswith("All good here.")
        assert turn.seconds < DEADLINE * 3  # an upper bound only
        assert exception_text(turn.text) == []
    assert sum(t.streamed for t in turns) == 12
    faults = fault_server.total(model="primary") - fault_server.total("ok", "primary")
    assert faults > 0  # the mix did inject faults...
    replies = await _stored_replies(api)  # ...and every turn has exactly one reply
    assert len(replies) == 36 and set(replies.values()) == {1}


async def test_api_faults_the_fallback_serves_streams(api: Api, fault_server: FaultServer) -> None:
    broken = FaultMix.always("500", "429", "bad_json", "no_choices", "cut")
    fault_server.mixes = {"primary": broken, "fallback": FaultMix.healthy()}
    turns = await _run(api, 8, every_nth_streamed=2)
    assert sum(t.streamed for t in turns) == 4
    for turn in turns:
        assert turn.status == 200 and turn.error is None, turn
        assert turn.reply.startswith("All good here.")
        assert exception_text(turn.text) == []
    assert fault_server.streams[("fallback", "ok")] >= 4
    assert fault_server.total("ok", "primary") == 0


async def test_api_faults_without_an_answer_fail_cleanly(
    api: Api, fault_server: FaultServer
) -> None:
    # Both models keep failing, in every way but hanging (that one is the deadline's test).
    broken = FaultMix.always("500", "429", "bad_json", "no_choices", "cut")
    fault_server.mixes = {"primary": broken, "fallback": broken}
    turns = await _run(api, 8, every_nth_streamed=2)
    for turn in turns:
        assert exception_text(turn.text) == [], turn.text
        assert "IndexError" not in turn.text and "Traceback" not in turn.text
        assert turn.seconds < DEADLINE * 3
        assert turn.error is not None
        assert turn.error["error"] == "model_unavailable"
        assert turn.error["message"] == FAILURE_NOTICE
        if turn.streamed:
            assert turn.status == 200 and turn.reply == ""
            assert turn.done["status"] == "failed"
            # A turn that starts after five failed ones finds the model's circuit open:
            # how many do depends on the order the four people's turns end in.
            reason = turn.done["reason"]
            assert reason.startswith(("model call failed", "model deadline")) or (
                "(circuit open)" in reason
            ), reason
        else:
            assert turn.status == 503
    inbound = await api.store.get_memories(
        agent_id=api.agent_id, kinds=[MemoryKind.MESSAGE], limit=100
    )
    assert len(inbound) == 8
    assert all(m.status is MemoryStatus.FAILED and m.error for m in inbound)
    assert all(not exception_text(m.error or "") for m in inbound)


async def test_api_faults_hanging_models_end_at_the_deadline(
    api: Api, fault_server: FaultServer
) -> None:
    fault_server.mixes = {"primary": FaultMix.always("hang"), "fallback": FaultMix.always("hang")}
    turns = await _run(api, 4, every_nth_streamed=2)
    for turn in turns:
        assert turn.seconds < DEADLINE * 3
        assert turn.error is not None and turn.error["message"] == FAILURE_NOTICE
    failed = await api.store.get_memories(
        agent_id=api.agent_id, kinds=[MemoryKind.MESSAGE], limit=100
    )
    for message in failed:  # the attempts or the deadline ran out first (or both at once)
        assert (message.error or "").startswith(("model deadline of 4 s", "model call failed"))
        outcomes = (message.error or "").split(": ", 1)[1].replace(";", ",").split(", ")
        assert {o.split(": ")[-1] for o in outcomes} == {"timeout"}, message.error
