"""The JobStore contract for schedules: every backend passes it."""

from __future__ import annotations

import asyncio

from carrier.jobs import CronSpec, IntervalSpec, JobStore, ManualClock, Schedule
from tests.jobs.conftest import T0, JobStoreFactory, at


def posts(**changes: object) -> Schedule:
    fields: dict[str, object] = {
        "name": "posts",
        "kind": "instagram.publish",
        "agent_id": "a1",
        "payload": {"account": "brand"},
        "spec": IntervalSpec(min_s=5400, max_s=10800),
    }
    return Schedule.model_validate({**fields, **changes})


async def test_put_get_list_delete(jobs: JobStore) -> None:
    stored = await jobs.put_schedule(posts())
    assert stored.created_at == T0 and stored.next_at is None
    await jobs.put_schedule(posts(name="digest", spec=CronSpec(expr="0 9 * * *")))
    assert await jobs.get_schedule("posts") == stored
    assert await jobs.get_schedule("missing") is None
    assert [s.name for s in await jobs.list_schedules()] == ["digest", "posts"]
    assert await jobs.delete_schedule("digest") is True
    assert await jobs.delete_schedule("digest") is False
    assert [s.name for s in await jobs.list_schedules()] == ["posts"]


async def test_putting_the_same_definition_keeps_progress(
    jobs: JobStore, clock: ManualClock
) -> None:
    await jobs.put_schedule(posts())
    assert await jobs.advance_schedule("posts", expected=None, next_at=at(100))
    clock.advance(10)
    again = await jobs.put_schedule(posts())
    assert again.next_at == at(100)
    changed = await jobs.put_schedule(posts(payload={"account": "other"}))
    assert changed.next_at is None
    assert changed.created_at == T0 and changed.updated_at == at(10)


async def test_advance_is_a_compare_and_set(jobs: JobStore) -> None:
    await jobs.put_schedule(posts())
    assert await jobs.advance_schedule("posts", expected=None, next_at=at(100))
    assert not await jobs.advance_schedule("posts", expected=None, next_at=at(200))
    assert not await jobs.advance_schedule("posts", expected=at(99), next_at=at(200))
    assert await jobs.advance_schedule("posts", expected=at(100), next_at=at(100), finished=True)
    stored = await jobs.get_schedule("posts")
    assert stored is not None and (stored.next_at, stored.finished) == (at(100), True)
    assert not await jobs.advance_schedule("missing", expected=None, next_at=at(1))


async def test_concurrent_advances_from_two_connections_let_one_win(
    job_store_factory: JobStoreFactory, clock: ManualClock
) -> None:
    async with job_store_factory.new_store(clock) as a, job_store_factory.new_store(clock) as b:
        await a.put_schedule(posts())
        wins = await asyncio.gather(
            *(
                store.advance_schedule("posts", expected=None, next_at=at(i))
                for i, store in enumerate([a, b] * 4)
            )
        )
        assert sum(wins) == 1
