"""Evaluators after the turn: fact extraction and summaries on the agent's background queue, which
hold neither the reply nor the message's status, are bounded and coalesced, and are caught up
after a crash from the store's watermarks."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from carrier.background import BackgroundWork
from carrier.builtin.evaluators import mark_key
from carrier.errors import ProviderError
from carrier.limits import TurnLimits
from carrier.llm.base import ModelRequest
from carrier.llm.deadline import Deadline, current_deadline
from carrier.llm.fake import FunctionModel
from carrier.types import MemoryKind, MemoryStatus
from tests.pipeline.conftest import data_text, dm, xml

FACT = '[{"claim": "Ana keeps bees", "about": "Ana", "type": "fact"}]'


class Gate:
    """Holds the model's fact calls until released (and says when one is waiting)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.open = asyncio.Event()

    async def facts(self) -> str:
        self.asked.set()
        await self.open.wait()
        return FACT


def gated_model(gate: Gate) -> FunctionModel:
    async def fn(request: ModelRequest) -> str:
        if request.purpose == "facts":
            return await gate.facts()
        return xml("Lovely.")

    return FunctionModel(fn)


async def facts_of(store: Any, agent_id: str) -> list[str]:
    found = await store.get_memories(agent_id=agent_id, kinds=[MemoryKind.FACT])
    return [m.content.text for m in found]


async def test_fact_extraction_runs_after_the_turn_and_persists(make_runtime, store) -> None:
    gate = Gate()
    runtime = make_runtime(gated_model(gate), fact_interval=2)
    await runtime.handle(dm("hi"))
    result = await runtime.handle(dm("I keep bees on my roof"))

    # The turn is over while the fact call still waits: its reply is stored and on its way,
    # and the message is closed once the reply is delivered.
    await gate.asked.wait()
    assert result.text == "Lovely." and result.status is MemoryStatus.PROCESSED
    assert result.trace["evaluate"]["queued"] == ["fact_extraction", "conversation_summary"]
    inbound = await store.get_memory(result.inbound_id)
    assert inbound.status is MemoryStatus.PENDING
    await runtime.outbox.deliver(result.replies)
    inbound = await store.get_memory(result.inbound_id)
    assert inbound.status is MemoryStatus.PROCESSED
    assert await facts_of(store, runtime.agent_id) == []

    gate.open.set()
    await runtime.settled()
    assert await facts_of(store, runtime.agent_id) == ["Ana keeps bees"]
    # What it read is a watermark in the store: the newest message from a person.
    mark = await store.get_setting(mark_key(runtime.agent_id, inbound.room_id))
    assert mark["ids"] == [result.inbound_id]


async def test_a_turn_in_the_same_room_is_not_held_by_its_background_work(make_runtime) -> None:
    gate = Gate()
    runtime = make_runtime(gated_model(gate), fact_interval=1)
    await runtime.handle(dm("first"))
    await gate.asked.wait()  # the fact call of the first message holds a worker
    second = await runtime.handle(dm("second"))  # the room's lock is free: it is answered
    assert second.text == "Lovely."
    gate.open.set()
    await runtime.settled()


async def test_facts_missed_by_a_stop_are_extracted_by_the_next_turn(make_runtime, store) -> None:
    gate = Gate()
    first = make_runtime(gated_model(gate), fact_interval=2)
    await first.handle(dm("I keep bees on my roof"))
    await first.handle(dm("they make heather honey"))
    await gate.asked.wait()
    # The process stops with the fact call in flight (no grace): nothing was stored.
    await first.background.close(grace=0)
    await first.stop()
    assert await facts_of(store, first.agent_id) == []

    model = FunctionModel(lambda r: FACT if r.purpose == "facts" else xml("Sure."))
    again = make_runtime(model, fact_interval=2)
    await again.handle(dm("anyway"))
    await again.settled()

    [extraction] = [r for r in model.requests if r.purpose == "facts"]
    assert "I keep bees on my roof" in data_text(extraction)  # the missed messages are read
    assert await facts_of(store, again.agent_id) == ["Ana keeps bees"]


async def test_fact_extraction_is_due_from_the_store_not_a_count(make_runtime, store) -> None:
    model = FunctionModel(lambda r: "[]" if r.purpose == "facts" else xml("ok"))
    for text in ("one", "two", "three"):
        # A new runtime each time (a restart): a count in memory would never reach 3.
        runtime = make_runtime(model, fact_interval=3)
        await runtime.handle(dm(text))
        await runtime.settled()
    assert [r.purpose for r in model.requests].count("facts") == 1


async def test_background_model_calls_have_their_own_deadline(make_runtime) -> None:
    seen: dict[str, Deadline | None] = {}

    def fn(request: ModelRequest) -> str:
        seen[request.purpose] = current_deadline()
        return "[]" if request.purpose == "facts" else xml("ok")

    model = FunctionModel(fn)
    model.deadline = 30.0
    runtime = make_runtime(model, fact_interval=1)
    await runtime.handle(dm("hello"))
    await runtime.settled()
    turn, facts = seen["response"], seen["facts"]
    assert turn is not None and facts is not None
    assert facts is not turn and facts.seconds == 30.0  # not what was left of the turn's


async def test_a_failing_background_call_is_logged_not_raised(make_runtime, caplog) -> None:
    def fn(request: ModelRequest) -> str:
        if request.purpose == "facts":
            raise ProviderError("the model is down")
        return xml("still here")

    runtime = make_runtime(FunctionModel(fn), fact_interval=1)
    with caplog.at_level(logging.INFO, logger="carrier.background"):
        result = await runtime.handle(dm("hello"))
        await runtime.settled()
    assert result.text == "still here"
    assert runtime.background.stats.failed == 1
    assert "fact_extraction in room" in caplog.text and "the model is down" in caplog.text


# -- the queue ------------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.ran: list[str] = []
        self.release = asyncio.Event()
        self.started = asyncio.Event()

        self.finished: dict[str, asyncio.Event] = {}

    def job(self, label: str, *, hold: bool = False) -> Any:
        finished = self.finished.setdefault(label, asyncio.Event())

        async def run() -> None:
            self.started.set()
            if hold:
                await self.release.wait()
            self.ran.append(label)
            finished.set()

        return run


async def test_a_busy_room_queues_one_catch_up_not_one_per_message() -> None:
    work = BackgroundWork(name="t", workers=1, backlog=8)
    rec = Recorder()
    work.submit(("facts", "busy"), rec.job("running", hold=True))
    await rec.started.wait()
    for i in range(10):
        work.submit(("facts", "busy"), rec.job(f"turn {i}"))
    assert work.waiting == 1 and work.stats.coalesced == 9
    rec.release.set()
    await work.join()
    assert rec.ran == ["running", "turn 9"]  # the newest turn's job, once
    await work.close()


async def test_one_key_never_runs_twice_at_once() -> None:
    work = BackgroundWork(name="t", workers=3, backlog=8)
    rec = Recorder()
    work.submit(("facts", "room"), rec.job("first", hold=True))
    await rec.started.wait()
    work.submit(("facts", "room"), rec.job("second"))
    work.submit(("facts", "other"), rec.job("other"))
    await rec.finished["other"].wait()  # a free worker took the other room's job
    assert rec.ran == ["other"]
    assert work.running == 1 and work.waiting == 1  # "second" waits for "first"
    rec.release.set()
    await work.join()
    assert rec.ran == ["other", "first", "second"]
    await work.close()


async def test_a_full_backlog_drops_the_oldest_waiting_job(caplog) -> None:
    work = BackgroundWork(name="t", workers=1, backlog=2)
    rec = Recorder()
    work.submit(("facts", "r0"), rec.job("r0", hold=True))
    await rec.started.wait()
    with caplog.at_level(logging.DEBUG, logger="carrier.background"):
        for room in ("r1", "r2", "r3"):
            work.submit(("facts", room), rec.job(room))
    assert work.waiting == 2 and work.stats.dropped == 1
    assert "dropped facts in room r1" in caplog.text
    rec.release.set()
    await work.join()
    assert rec.ran == ["r0", "r2", "r3"]
    await work.close()


async def test_close_drains_then_cancels_what_is_left() -> None:
    work = BackgroundWork(name="t", workers=1, backlog=4)
    rec = Recorder()
    work.submit(("facts", "quick"), rec.job("quick"))
    await work.close(grace=30)  # drained: the quick job ran
    assert rec.ran == ["quick"]

    stuck = BackgroundWork(name="t", workers=1, backlog=4)
    stuck.submit(("facts", "stuck"), rec.job("stuck", hold=True))
    stuck.submit(("facts", "after"), rec.job("after"))
    await stuck.close(grace=0)  # cancelled, the waiting one dropped
    assert rec.ran == ["quick"] and stuck.stats.dropped == 1
    stuck.submit(("facts", "late"), rec.job("late"))  # after close: dropped, never run
    await stuck.join()
    assert rec.ran == ["quick"] and stuck.stats.dropped == 2


async def test_jobs_wait_for_the_turns_to_leave_their_cpu_stages() -> None:
    """A job starts once no turn holds a gate of CPU work; the model's gate does not count (a
    turn waiting on the model leaves the CPU to background work)."""
    gates = TurnLimits().gates()
    work = BackgroundWork(name="t", workers=2, backlog=8, turns=gates, patience_s=60)
    rec = Recorder()
    async with gates.enter("generate"):
        work.submit(("facts", "during a model call"), rec.job("model"))
        await work.join()
    assert rec.ran == ["model"]

    turn_in_state = asyncio.Event()
    leave = asyncio.Event()

    async def turn() -> None:
        async with gates.enter("state"):
            turn_in_state.set()
            await leave.wait()

    holder = asyncio.create_task(turn())
    await turn_in_state.wait()
    work.submit(("facts", "r1"), rec.job("r1"))
    work.submit(("summary", "r1"), rec.job("s1"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert rec.ran == ["model"] and work.waiting == 2  # held while the turn composes its state
    work.submit(("facts", "r1"), rec.job("r1 again"))  # coalesced while it waits
    leave.set()
    await holder
    await work.join()
    assert rec.ran == ["model", "r1 again", "s1"]
    assert work.stats.coalesced == 1
    await work.close()


async def test_a_job_waits_for_the_turns_only_so_long() -> None:
    """Patience, a backlog half full and a closing queue each start a job while turns are busy:
    a busy agent gets through its background work, later."""
    gates = TurnLimits().gates()
    rec = Recorder()
    async with gates.enter("message"):
        assert gates.busy
        patient = BackgroundWork(name="t", workers=1, backlog=8, turns=gates, patience_s=0.05)
        patient.submit(("facts", "r1"), rec.job("after its patience"))
        await rec.finished["after its patience"].wait()

        crowded = BackgroundWork(name="t", workers=1, backlog=4, turns=gates, patience_s=60)
        crowded.submit(("facts", "a"), rec.job("a"))
        for _ in range(20):
            await asyncio.sleep(0)
        assert "a" not in rec.ran  # one of four: it waits
        crowded.submit(("facts", "b"), rec.job("b"))  # two of four: half full, the first starts
        await rec.finished["a"].wait()
        for _ in range(20):
            await asyncio.sleep(0)
        assert "b" not in rec.ran and crowded.waiting == 1  # one of four again: it waits

        closing = BackgroundWork(name="t", workers=1, backlog=8, turns=gates, patience_s=60)
        closing.submit(("facts", "c"), rec.job("c"))
        await closing.close(grace=30)  # drained at stop, turns or not
    assert not gates.busy
    await crowded.join()  # the turn left: "b" starts
    assert rec.ran == ["after its patience", "a", "c", "b"]
    await patient.close()
    await crowded.close()


def test_background_work_needs_a_worker_and_a_backlog() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        BackgroundWork(name="t", workers=0)
    with pytest.raises(ValueError, match="patience_s must be 0 or more"):
        BackgroundWork(name="t", patience_s=-1)


async def test_reply_vectors_are_made_after_delivery_and_caught_up(make_runtime, store) -> None:
    model = FunctionModel(lambda r: "[]" if r.purpose == "facts" else xml("Noted."))
    first = make_runtime(model)
    lost = await first.handle(dm("remember the lighthouse"))
    [reply] = lost.replies
    assert (await store.get_memory(reply.id)).embedding is None  # the turn did not wait for it
    await first.background.close(grace=0)  # the process stops before the vector is made
    await first.outbox.deliver(lost.replies)
    assert (await store.get_memory(reply.id)).embedding is None

    again = make_runtime(model)
    later = await again.handle(dm("and the harbour"))
    await again.outbox.deliver(later.replies)
    await again.settled()
    for memory in (reply, *later.replies):
        stored = await store.get_memory(memory.id)
        assert stored.status is MemoryStatus.SENT  # the delivery status is left as it was
        assert stored.embedding_model == again.embedder.model_id and stored.embedding


async def test_what_a_turn_stored_is_indexed_for_text_search_after_it(make_runtime, store) -> None:
    runtime = make_runtime(FunctionModel(lambda r: "[]" if r.purpose == "facts" else xml("Ahoy.")))
    result = await runtime.handle(dm("the lighthouse keeper waves"))
    db = store._writer
    assert (
        db.execute("SELECT count(*) FROM memories_fts_pending").fetchone()[0] == 2
    )  # not in the turn
    await runtime.settled()
    assert db.execute("SELECT count(*) FROM memories_fts_pending").fetchone()[0] == 0
    indexed = {row[0] for row in db.execute("SELECT term FROM memories_vocab")}
    assert {"lighthouse", "keeper", "ahoy"} <= indexed
    assert result.replies
