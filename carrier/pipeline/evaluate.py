"""Stage 5, the evaluator: record the replies (once, ``pending``: the outbox), run the post-turn
evaluators, and close the inbound message (processed, ignored or failed), or, when it has
replies, leave it ``pending`` until the client has delivered them (:mod:`carrier.outbox`). It
runs for every turn, also one that ended early, so every stored message reaches a final status;
the runtime then runs the ``on_turn_end`` hooks.

Evaluators marked ``background`` (fact extraction, summaries) are not run here: they are queued
on the agent's background work (:mod:`carrier.background`) once the message's status is set, so
their model calls hold neither the reply nor the room."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from carrier.errors import ProviderError
from carrier.outbox import reply_id
from carrier.pipeline.base import Turn
from carrier.plugins import Evaluator
from carrier.types import Memory, MemoryKind, MemoryStatus, stable_id

__all__ = ["EvaluatorStage"]

log = logging.getLogger(__name__)


def _job(evaluator: Evaluator, turn: Turn) -> Callable[[], Awaitable[None]]:
    """The evaluator as a background job: whether it is due is asked when it runs (it reads the
    store then, with whatever arrived since), and its failures are the queue's to log."""

    async def run() -> None:
        if await evaluator.validate(turn):
            await evaluator.handler(turn)

    return run


class EvaluatorStage:
    name = "evaluate"

    async def process(self, turn: Turn) -> None:
        rt = turn.runtime
        assert turn.inbound is not None and turn.room is not None
        replies = self._replies(turn) if turn.outbound else []
        due = [e for e in rt.registry.evaluators.values() if e.always_run or not turn.ended]
        now = [e for e in due if not e.background]
        later = [e for e in due if e.background]
        if replies and now:
            # The turn's own evaluators see its replies stored.
            turn.replies, replies = await self._add(turn, replies), []
        ran = await self._run(now, turn)
        status = turn.final_status
        error = turn.ended if status is MemoryStatus.FAILED else None
        stored = status
        if replies or turn.replies:
            if status is MemoryStatus.FAILED:  # nothing of a failed turn goes out
                if replies:  # recorded (once), then failed with the turn
                    turn.replies, replies = await self._add(turn, replies), []
                await rt.outbox.fail(turn.inbound.id, error or "the turn failed")
            else:
                # Closed by the delivery: processed once a reply went out, failed if none did.
                stored = MemoryStatus.PENDING
        # One write: the replies, the message's vector and its status. Only the turn's own
        # message, still ``received``, changes status: a redelivered one that is already closed
        # (or whose replies are on their way) stays as it is.
        record = await rt.store.record_turn(
            turn.inbound,
            stored,
            error=error,
            expect=[MemoryStatus.RECEIVED],
            replies=replies,
            vector=turn.vector_unsaved,
        )
        turn.vector_unsaved = False
        if replies:
            turn.replies = record.replies
        if record.changed:
            turn.inbound.status = stored
        for evaluator in later:
            rt.background.submit((evaluator.name, turn.room.id), _job(evaluator, turn))
        turn.trace["evaluate"] = {
            "replies": [m.id for m in turn.replies],
            "evaluators": ran,
            "queued": [e.name for e in later],
            "status": status.value,
            "ended": turn.ended,
        }

    async def _run(self, evaluators: list[Evaluator], turn: Turn) -> list[str]:
        """Run the evaluators that belong to the turn; returns the names of those that ran."""
        ran = []
        for evaluator in evaluators:
            try:
                if await evaluator.validate(turn):
                    await evaluator.handler(turn)
                    ran.append(evaluator.name)
            except ProviderError as exc:
                # No answer from the model (it kept failing, or the turn's deadline passed): not
                # a bug, and the reply stands.
                log.info("evaluator %s had no answer from the model: %s", evaluator.name, exc)
            except Exception:
                # The reply is already decided; a failing evaluator must not cost it.
                log.exception("evaluator %s failed; the turn goes on", evaluator.name)
        return ran

    @staticmethod
    async def _add(turn: Turn, replies: list[Memory]) -> list[Memory]:
        return [await turn.runtime.store.add_memory(memory) for memory in replies]

    @staticmethod
    def _replies(turn: Turn) -> list[Memory]:
        """The turn's replies as memories to store (``pending``: the outbox)."""
        rt = turn.runtime
        assert turn.inbound is not None and turn.room is not None
        agent_entity = stable_id(rt.agent_id, "agent")
        replies = []
        for i, content in enumerate(turn.outbound):
            content.source = turn.message.platform
            content.in_reply_to = turn.inbound.id
            content.metadata.setdefault("speaker", rt.character.name)
            if i == 0:
                # The turn's model use is recorded once, on its first reply.
                if turn.response is not None and turn.response.thought:
                    content.thought = turn.response.thought
                content.metadata["usage"] = turn.usage.model_dump()
                content.metadata["model"] = turn.trace.get("generate", {}).get("model")
                if turn.trace.get("generate", {}).get("cut"):
                    content.metadata["cut"] = True  # the stream broke; the text says so too
                # A compact trace for the turn's history (the console): what the actions did
                # and where the time went before this stage (the whole trace stays in memory).
                content.metadata["trace"] = {
                    "actions": [
                        {"action": r.action, "ok": r.ok, "error": (r.error or "")[:300] or None}
                        for r in turn.action_results
                    ],
                    "timings_ms": dict(turn.trace.get("timings_ms") or {}),
                }
            memory = Memory(
                # Derived from the inbound id: a re-run turn records its reply once.
                id=reply_id(turn.inbound.id, i),
                agent_id=rt.agent_id,
                room_id=turn.room.id,
                entity_id=agent_entity,
                kind=MemoryKind.MESSAGE,
                content=content,
                # No vector yet: nothing in the turn reads it; it is made once the reply is
                # delivered, in the background (carrier.reply_vectors).
                status=MemoryStatus.PENDING,  # until the client has sent it
            )
            replies.append(memory)
        return replies
