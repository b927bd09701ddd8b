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
        if turn.outbound:
            turn.replies = await self._store_replies(turn)

        ran: list[str] = []
        later: list[Evaluator] = []
        for evaluator in list(rt.registry.evaluators.values()):
            if turn.ended and not evaluator.always_run:
                continue
            if evaluator.background:
                later.append(evaluator)
                continue
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
        status = turn.final_status
        error = turn.ended if status is MemoryStatus.FAILED else None
        stored = status
        if turn.replies:
            if status is MemoryStatus.FAILED:  # nothing of a failed turn goes out
                await rt.outbox.fail(turn.inbound.id, error or "the turn failed")
            else:
                # Closed by the delivery: processed once a reply went out, failed if none did.
                stored = MemoryStatus.PENDING
        # Only the turn's own message, still ``received``: a redelivered one that is already
        # closed (or whose replies are on their way) stays as it is.
        if await rt.store.set_memory_status(
            turn.inbound.id, stored, error=error, expect=[MemoryStatus.RECEIVED]
        ):
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

    async def _store_replies(self, turn: Turn) -> list[Memory]:
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
            replies.append(await rt.store.add_memory(memory))
        return replies
