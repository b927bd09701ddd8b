"""The log tail: records attributed to an agent (by ``extra``, by context, by its id or name in
the text; a job handler's by its job's agent), kept in a bounded ring, redacted, and handed to
followers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from carrier.logtail import LogTail, agent_logs, install_log_tail, job_logs, level_number
from carrier.safety.redact import MARKER, Redactor, using_redactor

log = logging.getLogger("carrier.test.logtail")
SECRET = "sk-proj-" + "Q7w9E2r4T6y8U0i1O3p5A7s9D" * 2


@pytest.fixture
def tail() -> Iterator[LogTail]:
    made, uninstall = install_log_tail(lambda: {"ada-1": "Ada", "bo-2": "Bo"}, capacity=3)
    log.setLevel(logging.DEBUG)
    yield made
    uninstall()
    log.setLevel(logging.NOTSET)


def test_records_go_to_the_agent_they_name(tail: LogTail) -> None:
    log.info("by extra", extra={"agent_id": "bo-2"})
    with agent_logs("ada-1"):
        log.info("inside the block")
    log.warning("Ada: no answer from the model: timeout")
    log.info("agent bo-2: taking the discord connection over")
    log.info("nobody's")
    assert [x.message for x in tail.recent("ada-1")] == [
        "inside the block",
        "Ada: no answer from the model: timeout",
    ]
    assert [x.message for x in tail.recent("bo-2")] == [
        "by extra",
        "agent bo-2: taking the discord connection over",
    ]
    assert [x.message for x in tail.recent(None)][-1] == "nobody's"
    assert [x.level for x in tail.recent("ada-1", level=level_number("warning"))] == ["WARNING"]


def test_the_ring_is_bounded_and_after_skips_what_was_seen(tail: LogTail) -> None:
    for i in range(5):
        log.info("line %d", i, extra={"agent_id": "ada-1"})
    kept = tail.recent("ada-1")
    assert [x.message for x in kept] == ["line 2", "line 3", "line 4"]
    assert [x.message for x in tail.recent("ada-1", after=kept[0].seq)] == ["line 3", "line 4"]


def test_a_secret_in_a_record_is_redacted_before_it_is_kept(tail: LogTail) -> None:
    with using_redactor(Redactor()):
        log.warning("Ada: provider said: bad key %s", SECRET)
        try:
            raise RuntimeError(f"auth failed for {SECRET}")
        except RuntimeError:
            log.exception("Ada: turn failed")
    lines = tail.recent("ada-1")
    assert len(lines) == 2
    for line in lines:
        assert SECRET not in line.message
        assert MARKER in line.message
    assert "RuntimeError" in lines[1].message


def test_unknown_level_says_the_choices() -> None:
    with pytest.raises(ValueError, match="DEBUG, INFO"):
        level_number("loud")


async def test_followers_get_new_lines_from_any_thread(tail: LogTail) -> None:
    async with tail.follow("ada-1") as queue:
        await asyncio.to_thread(log.info, "from a thread", extra={"agent_id": "ada-1"})
        log.info("someone else's", extra={"agent_id": "bo-2"})
        line = await asyncio.wait_for(queue.get(), 5)
        assert line.message == "from a thread"
        assert queue.empty()


async def test_a_job_handlers_lines_are_its_jobs_agents(tail: LogTail) -> None:
    @dataclass
    class Job:
        agent_id: str | None

    @job_logs
    async def handler(job: Job, ctx: object) -> str:
        log.info("handling it")
        await asyncio.sleep(0)
        log.info("done with it")
        return "ok"

    assert await handler(Job("bo-2"), None) == "ok"
    assert await handler(Job(None), None) == "ok"
    assert [x.message for x in tail.recent("bo-2")] == ["handling it", "done with it"]
    assert [x.message for x in tail.recent(None)][-2:] == ["handling it", "done with it"]
    log.info("after it")  # the context is the caller's again
    assert tail.recent(None)[-1].message == "after it"
