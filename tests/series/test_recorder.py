"""The recorder, on SQLite and on MongoDB: turns counted in memory, written in one write per
flush (minute and day counters), kept when a write fails, spending read back for the budgets;
and its hook counting real turns of a real runtime."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from carrier.character import Character
from carrier.errors import StoreError
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import AgentRuntime
from carrier.series import Row, SeriesRecorder, SeriesStore, Step
from carrier.series.model import LATENCY_BOUNDS_MS, percentile
from carrier.types import Author, Channel, Message, RoomKind, Usage
from tests.series.conftest import T0, Clock, SeriesFactory

M = int(T0)
D = M - M % 86_400


class Counting(SeriesStore):
    """A store that counts its writes and fails the ones it is told to."""

    def __init__(self, inner: SeriesStore) -> None:
        self.inner = inner
        self.writes = 0
        self.fail_next = 0

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def schema_version(self) -> int:
        return await self.inner.schema_version()

    async def _add(self, rows: Sequence[Row]) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise StoreError("the database is away")
        self.writes += 1
        await self.inner._add(rows)

    async def _select(self, *args: object) -> list[Row]:
        return await self.inner._select(*args)  # type: ignore[arg-type]

    async def _delete_before(self, step: Step, t: int) -> int:
        return await self.inner._delete_before(step, t)


def turn(
    recorder: SeriesRecorder, agent: str = "a", *, cost: float = 0.01, failed: bool = False
) -> None:
    recorder.observe_turn(
        agent,
        failed=failed,
        usage=Usage(prompt_tokens=100, completion_tokens=20, cost_usd=cost, calls=1),
        timings_ms={"receive": 2.0, "generate": 300.0, "evaluate": 40.0},
    )


async def test_recorder_writes_once_per_flush_minute_and_day(series: SeriesStore) -> None:
    clock = Clock()
    store = Counting(series)
    recorder = SeriesRecorder(store, clock=clock)
    for _ in range(50):
        turn(recorder)
    turn(recorder, failed=True)
    clock.now += 60  # the next minute
    turn(recorder, "b", cost=0.5)
    assert store.writes == 0  # nothing written by a turn
    await recorder.flush()
    assert store.writes == 1
    minutes = await series.select(Step.MINUTE, M, M + 120, names=["turns", "errors", "cost_usd"])
    assert [(r.t, r.agent, r.name, round(r.value, 6)) for r in minutes] == [
        (M, "a", "cost_usd", 0.51),
        (M, "a", "errors", 1.0),
        (M, "a", "turns", 51.0),
        (M + 60, "b", "cost_usd", 0.5),
        (M + 60, "b", "turns", 1.0),
    ]
    days = await series.select(Step.DAY, D, D + 86_400, names=["turns", "tokens.prompt"])
    assert [(r.agent, r.name, r.value) for r in days] == [
        ("a", "tokens.prompt", 5100.0),
        ("a", "turns", 51.0),
        ("b", "tokens.prompt", 100.0),
        ("b", "turns", 1.0),
    ]
    generate = await series.select(Step.DAY, D, D + 86_400, prefixes=["latency.generate."])
    counts = [0.0] * (len(LATENCY_BOUNDS_MS) + 1)
    for row in generate:
        counts[int(row.name.rsplit(".", 1)[1])] += row.value
    assert sum(counts) == 52
    assert 250 <= (percentile(counts, 0.5) or 0) <= 500  # 300 ms, in its bucket
    await recorder.flush()
    assert store.writes == 1  # nothing new, nothing written


async def test_recorder_keeps_counts_when_a_write_fails(series: SeriesStore) -> None:
    store = Counting(series)
    recorder = SeriesRecorder(store, clock=Clock())
    turn(recorder)
    store.fail_next = 1
    await recorder.flush()
    assert recorder.failures == 1
    assert await series.select(Step.MINUTE, M, M + 60, names=["turns"]) == []
    turn(recorder)
    await recorder.flush()
    [row] = await series.select(Step.MINUTE, M, M + 60, names=["turns"])
    assert row.value == 2  # nothing lost


async def test_recorder_spending_counts_memory_store_and_other_processes(
    series_factory: SeriesFactory,
) -> None:
    clock = Clock()
    async with series_factory.new_store() as one, series_factory.new_store() as two:
        here, there = SeriesRecorder(one, clock=clock), SeriesRecorder(two, clock=clock)
        turn(here, cost=0.25)
        assert here.spent("a").day_usd == pytest.approx(0.25)  # before any write
        await here.flush()
        assert here.spent("a").day_usd == pytest.approx(0.25)  # read back, not counted twice
        turn(there, cost=0.5)
        turn(there, "b", cost=1.0)
        await there.flush()
        await here.flush()  # reads back what the other process wrote
        assert here.spent("a").day_usd == pytest.approx(0.75)
        assert here.spent(None).month_usd == pytest.approx(1.75)
        clock.now += 86_400  # tomorrow, same month: today's spending starts again
        assert here.spent("a").day_usd == 0
        assert here.spent("a").month_usd == pytest.approx(0.75)


async def test_recorder_hook_counts_a_real_turn(tmp_path: object, series: SeriesStore) -> None:
    def answer(request: ModelRequest) -> str:
        if request.purpose == "facts":
            return "[]"
        return "<response><thought>t</thought><actions>REPLY</actions><text>hi</text></response>"

    recorder = SeriesRecorder(series)
    character = Character.model_validate({"name": "Pilot", "bio": ["flies"]})
    model = FunctionModel(answer, model="priced", prices={"priced": (1e-6, 2e-6)})
    async with SQLiteStore(path=f"{tmp_path}/store.db") as store:
        runtime = AgentRuntime(
            character=character, store=store, embedder=HashEmbedder(), model=model
        )
        runtime.registry.register(recorder.plugin())
        await runtime.start()
        try:
            message = Message(
                platform="api",
                author=Author(platform_id="ana", name="Ana"),
                channel=Channel(platform_id="api-ana", kind=RoomKind.API),
                text="hello",
            )
            result = await runtime.handle(message)
        finally:
            await runtime.stop()
    await recorder.aclose()
    assert result.usage.cost_usd > 0
    now = int(recorder.clock())
    rows = await series.select(
        Step.DAY, now - 86_400, now + 86_400, names=["turns", "cost_usd"], agents=[runtime.agent_id]
    )
    got = {r.name: r.value for r in rows}
    assert got["turns"] == 1
    assert got["cost_usd"] == pytest.approx(result.usage.cost_usd)
    stages = await series.select(Step.DAY, now - 86_400, now + 86_400, prefixes=["latency."])
    assert {r.name.split(".")[1] for r in stages} >= {"receive", "generate", "turn"}


async def test_recorder_counts_job_outcomes_and_redactions(series: SeriesStore) -> None:
    from carrier.jobs._run import WorkerStats
    from carrier.safety.redact import Redactor

    stats = WorkerStats(succeeded=5, failed=1)  # before the recorder watched: not counted
    recorder = SeriesRecorder(series, clock=Clock())
    recorder.watch_jobs(lambda: stats)
    await recorder.start()
    try:
        stats.succeeded += 3
        stats.failed += 1
        stats.retried += 2
        Redactor(learns=False).report("model", 2, ["openai key"])
        await recorder.flush()
        stats.succeeded += 1
        await recorder.flush()
    finally:
        await recorder.aclose()
    rows = await series.select(Step.DAY, D, D + 86_400, names=["redactions"], prefixes=["jobs."])
    assert {(r.agent, r.name): r.value for r in rows} == {
        ("", "jobs.failed"): 1,
        ("", "jobs.retried"): 2,
        ("", "jobs.succeeded"): 4,
        ("", "redactions"): 2,
    }
