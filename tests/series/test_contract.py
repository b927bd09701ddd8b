"""The series store's contract, on SQLite and on MongoDB: counters add up, reads filter by
step, time, agent and name (exact or by prefix), old counters are pruned, and two processes
adding to one counter both count."""

from __future__ import annotations

import pytest

from carrier.errors import StoreError
from carrier.series import Row, SeriesStore, Step
from tests.series.conftest import T0, SeriesFactory

M = int(T0)  # a minute start
D = M - M % 86_400  # its day


def values(rows: list[Row]) -> list[tuple[int, str, str, float]]:
    return [(r.t, r.agent, r.name, r.value) for r in rows]


async def test_series_counters_add_up_in_one_write(series: SeriesStore) -> None:
    await series.add([Row(Step.MINUTE, M, "a", "turns", 1), Row(Step.MINUTE, M, "a", "turns", 2)])
    await series.add([Row(Step.MINUTE, M, "a", "turns", 4), Row(Step.DAY, D, "a", "turns", 7)])
    await series.add([Row(Step.MINUTE, M, "a", "cost_usd", 0)])  # nothing to write
    assert values(await series.select(Step.MINUTE, M, M + 60, names=["turns", "cost_usd"])) == [
        (M, "a", "turns", 7.0)
    ]
    assert values(await series.select(Step.DAY, D, D + 86_400, names=["turns"])) == [
        (D, "a", "turns", 7.0)
    ]
    assert await series.schema_version() == 1


async def test_series_select_filters_time_agent_and_names(series: SeriesStore) -> None:
    rows = [
        Row(Step.MINUTE, M - 60, "a", "turns", 1),
        Row(Step.MINUTE, M, "a", "turns", 2),
        Row(Step.MINUTE, M, "b", "turns", 3),
        Row(Step.MINUTE, M, "a", "latency.generate.03", 1),
        Row(Step.MINUTE, M, "a", "latency.generate.05", 2),
        Row(Step.MINUTE, M, "a", "latency.generated.01", 9),  # not the prefix "latency.generate."
        Row(Step.MINUTE, M + 60, "a", "turns", 4),
    ]
    await series.add(rows)
    assert values(await series.select(Step.MINUTE, M, M + 60, names=["turns"])) == [
        (M, "a", "turns", 2.0),
        (M, "b", "turns", 3.0),
    ]
    assert values(
        await series.select(Step.MINUTE, M - 60, M + 120, names=["turns"], agents=["a"])
    ) == [(M - 60, "a", "turns", 1.0), (M, "a", "turns", 2.0), (M + 60, "a", "turns", 4.0)]
    assert values(
        await series.select(Step.MINUTE, M, M + 60, prefixes=["latency.generate."], agents=["a"])
    ) == [(M, "a", "latency.generate.03", 1.0), (M, "a", "latency.generate.05", 2.0)]
    assert await series.select(Step.MINUTE, M, M + 60) == []  # no name asked: nothing
    assert await series.select(Step.MINUTE, M, M + 60, names=["turns"], agents=[]) == []
    assert await series.select(Step.DAY, M, M + 60, names=["turns"]) == []


async def test_series_prune_keeps_the_recent(series: SeriesStore) -> None:
    day = 86_400
    await series.add(
        [
            Row(Step.MINUTE, M - 8 * day, "a", "turns", 1),
            Row(Step.MINUTE, M - 6 * day, "a", "turns", 1),
            Row(Step.DAY, D - 400 * day, "a", "turns", 1),
            Row(Step.DAY, D - 30 * day, "a", "turns", 1),
        ]
    )
    assert await series.prune(now=T0, minute_days=7, day_days=365) == 2
    assert [r.t for r in await series.select(Step.MINUTE, 0, M + 1, names=["turns"])] == [
        M - 6 * day
    ]
    assert [r.t for r in await series.select(Step.DAY, 0, M + 1, names=["turns"])] == [D - 30 * day]


async def test_series_two_processes_add_to_one_counter(series_factory: SeriesFactory) -> None:
    async with series_factory.new_store() as one, series_factory.new_store() as two:
        await one.add([Row(Step.DAY, D, "a", "cost_usd", 0.25)])
        await two.add([Row(Step.DAY, D, "a", "cost_usd", 0.5)])
        [row] = await one.select(Step.DAY, D, D + 1, names=["cost_usd"])
        assert row.value == pytest.approx(0.75)


async def test_series_closed_store_says_how_to_open_it(series_factory: SeriesFactory) -> None:
    store = series_factory.new_store()
    with pytest.raises(StoreError, match="open"):
        await store.add([Row(Step.DAY, D, "a", "turns", 1)])
