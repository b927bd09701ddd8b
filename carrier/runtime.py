"""AgentRuntime: one agent (one character) running turns through the five-stage pipeline.

runtime = AgentRuntime(character=c, store=store, embedder=embedder, model=model)
await runtime.start()
result = await runtime.handle(message)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from carrier.background import BackgroundWork
from carrier.builtin.actions import builtin_actions
from carrier.builtin.evaluators import FactExtractor
from carrier.builtin.memory_actions import memory_plugin
from carrier.builtin.providers import builtin_providers
from carrier.gates import Load
from carrier.limits import TurnLimits
from carrier.llm.base import ChatMessage, ModelProvider, ModelRequest
from carrier.llm.deadline import model_deadline
from carrier.llm.parse import ParsedResponse, format_instructions, parse_response
from carrier.memory.base import Store
from carrier.memory.embedder import Embedder
from carrier.outbox import RECOVERY_SECONDS, Outbox
from carrier.pipeline.actions import ActionManager
from carrier.pipeline.base import ChunkCallback, HookPoint, Stage, Turn, run_hooks
from carrier.pipeline.evaluate import EvaluatorStage
from carrier.pipeline.generate import Generator, offered_tools
from carrier.pipeline.message import MessageManager
from carrier.pipeline.state import StateComposer
from carrier.plugins import Plugin, Registry
from carrier.prompts import render_system, template_for
from carrier.reply_vectors import embed_replies
from carrier.serving import EVERY, Platforms
from carrier.types import (
    AgentRecord,
    Author,
    Memory,
    MemoryStatus,
    Message,
    Usage,
    utcnow,
)

if TYPE_CHECKING:
    from carrier.memory.rights import ForgetReport

__all__ = ["AgentRuntime", "TurnResult"]

log = logging.getLogger(__name__)


@dataclass
class TurnResult:
    """The outcome of :meth:`AgentRuntime.handle`."""

    status: MemoryStatus
    inbound_id: str
    replies: list[Memory] = field(default_factory=list)
    """Stored ``pending``: the client sends them with ``runtime.outbox.deliver(replies, send)``,
    which marks each sent (or failed) and closes the inbound message."""
    reason: str | None = None
    """Why nothing (or less) was sent: ignored, muted, superseded, rejected by a hook, ..."""
    thought: str = ""
    actions: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    offline: bool = False
    trace: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """All reply texts, joined by blank lines."""
        return "\n\n".join(m.content.text for m in self.replies)


class _RoomSlot:
    __slots__ = ("latest", "lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.latest: str | None = None
        self.users = 0


class AgentRuntime:
    """Runs one character's turns. Keyword-only; build it at the edge and pass it to clients."""

    def __init__(
        self,
        *,
        character: Any,
        store: Store,
        embedder: Embedder,
        model: ModelProvider,
        plugins: Sequence[Plugin] = (),
        seed: int | None = None,
        recent_messages: int = 20,
        recall_k: int = 6,
        fact_interval: int = 4,
        ignore: Sequence[str] = (),
        summary_threshold: int = 20,
        memory_tools: bool = False,
        reply_recovery_s: float = RECOVERY_SECONDS,
        limits: TurnLimits | None = None,
    ) -> None:
        self.character = character
        self.agent_id: str = character.agent_id
        self.store = store
        self.embedder = embedder
        self.model = model
        self.ignore = {i.lower() for i in ignore}
        self.started_at = utcnow()
        self.outbox = Outbox(
            store, agent_id=self.agent_id, since=self.started_at, window_s=reply_recovery_s
        )
        """The agent's replies on their way out (:mod:`carrier.outbox`)."""
        self.knowledge_report: Any = None
        """What the last knowledge sync did (:class:`carrier.knowledge.KnowledgeReport`)."""
        self.services: dict[str, Any] = {}
        """Process-wide services the host gives its agents and their clients (``"jobs"``: the
        job store), so adapters reach them without importing the host."""
        self._seeds = random.Random(seed)
        self.registry = Registry()
        self.registry.register(
            Plugin(
                name="core",
                actions=builtin_actions(),
                evaluators=[FactExtractor(interval=fact_interval).as_evaluator()],
                providers=builtin_providers(),
                description="Carrier's built-in actions, evaluators and context providers.",
            )
        )
        # Summaries of what leaves the recent window (every `summary_threshold` messages; 0 = off);
        # the memory tools only when asked for, as offering tools turns off streaming.
        self.registry.register(
            memory_plugin(
                window=recent_messages, summary_threshold=summary_threshold, tools=memory_tools
            )
        )
        for plugin in plugins:
            self.registry.register(plugin)
        self.message_manager = MessageManager()
        self._composer = StateComposer(recent_messages=recent_messages, recall_k=recall_k)
        self._generator = Generator()
        # The chain, in order: the message is stored and embedded first (nothing is lost, and recall
        # can use its vector); the state is composed from the store; the model answers from the
        # state; actions run on the parsed answer; the evaluator records the replies (pending,
        # the message pending with them) last; the client's delivery closes the message, so
        # "processed" always means "a reply went out, or none was needed".
        self.stages: list[Stage] = [
            self.message_manager,
            self._composer,
            self._generator,
            ActionManager(),
        ]
        self.closer = EvaluatorStage()
        limits = limits or TurnLimits()
        self.gates = limits.gates()
        """How many turns each busy stage admits at once (:mod:`carrier.gates`); the message
        stage enters its gate itself, around its hooks and embedding only (its should-respond
        question to the model waits on the model alone)."""
        self.background = BackgroundWork(
            name=f"agent {self.character.name}",
            workers=limits.background_workers,
            backlog=limits.background_backlog,
            deadline_s=model.deadline,  # as long as a turn's, counted from the job's start
            turns=self.gates,  # jobs wait (a little) for turns to leave their CPU stages
            patience_s=limits.background_patience_s,
        )
        """Evaluators that run after the turn (:mod:`carrier.background`)."""
        self.outbox.on_delivered = self._vectors_later
        self._rooms: dict[str, _RoomSlot] = {}
        self._search_ready: asyncio.Task[None] | None = None

    @property
    def names(self) -> list[str]:
        """Names the agent answers to (name, username)."""
        return [n for n in (self.character.name, getattr(self.character, "username", None)) if n]

    def next_seed(self) -> int:
        return self._seeds.randrange(2**31)

    def is_ignored(self, author: Author) -> bool:
        keys = {author.platform_id.lower(), author.name.lower(), (author.username or "").lower()}
        return bool(self.ignore & keys)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, *, recover: Platforms = EVERY) -> int:
        """Record the agent in the store and deal with turns a previous process left unfinished
        on the platforms this process serves (``recover``; every one by default, as a single
        process serves them all). Returns how many interrupted messages were found."""
        # A runtime built without a stored agent (``carrier chat`` of a file) records one; a
        # stored agent's character is the store's (its revisions: carrier.agents), never
        # rewritten from here.
        if await self.store.get_agent(self.agent_id) is None:
            data = self.character.model_dump(mode="json", by_alias=True, exclude_none=True)
            record = AgentRecord(id=self.agent_id, name=self.character.name, character=data)
            await self.store.upsert_agent(record)
        # Load the agent's vectors (and its ANN index) in the background: the first recall then
        # finds them in memory instead of scanning the database, and start-up does not wait.
        if self._search_ready is None or self._search_ready.done():
            self._search_ready = asyncio.get_running_loop().create_task(
                self._prepare_search(), name=f"carrier-prepare-search-{self.agent_id}"
            )
        # The character's knowledge is chunked and embedded once; changed files are re-ingested,
        # removed ones forgotten. A bad path is reported and the agent keeps what it knew.
        from carrier.knowledge import sync_character_knowledge

        self.knowledge_report = await sync_character_knowledge(
            self.store, self.embedder, self.character
        )
        # The model's library loads now (litellm: seconds), not inside the first turn's deadline.
        await self.model.prepare()
        return await self.recover(platforms=recover)

    async def search_ready(self) -> None:
        """Return once the vector search :meth:`start` prepares is ready (at once if not
        started). Searches before that are answered too, only more slowly."""
        if self._search_ready is not None:
            await asyncio.shield(self._search_ready)

    async def _prepare_search(self) -> None:
        try:
            await self.store.prepare_search(
                agent_id=self.agent_id,
                embedding_model=self.embedder.model_id,
                dim=self.embedder.dim,
            )
        except Exception:  # searches still work, through the store's slower path
            log.warning(
                "agent %s: preparing vector search failed; recall reads the database instead",
                self.agent_id,
                exc_info=True,
            )

    def _vectors_later(self, replies: Sequence[Memory]) -> None:
        """Delivered replies get their vectors in the background (:mod:`carrier.reply_vectors`)."""
        for room_id in dict.fromkeys(r.room_id for r in replies):

            async def job(room_id: str = room_id) -> None:
                await embed_replies(
                    self.store, self.embedder, agent_id=self.agent_id, room_id=room_id
                )

            self.background.submit(("reply_vectors", room_id), job)

    async def settled(self) -> None:
        """Return once the background work the turns so far queued (fact extraction,
        summaries) is done: what tests and a graceful stop wait on, rather than sleeping."""
        await self.background.join()

    async def stop(self) -> None:
        # Background work first, while the store and the model are still there: a short drain,
        # then the rest is cancelled (the next turn in its room catches up on it).
        await self.background.close()
        if self._search_ready is not None:
            self._search_ready.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._search_ready
            self._search_ready = None
        await self.outbox.aclose()
        await self.model.aclose()

    async def recover(self, *, platforms: Platforms = EVERY, since: datetime | None = None) -> int:
        """Settle the turns a previous process left unfinished on ``platforms``, before
        ``since`` (this runtime's start by default; the moment this process took a platform's
        connection over, for that platform) (:meth:`Outbox.recover`): a message with no reply
        stored is failed ("interrupted"); replies already stored are sent if still fresh (by
        their client, once connected) or failed as too old, and the message closed accordingly,
        so nothing is silently lost or answered hours late. Returns how many unfinished
        messages were found."""
        report = await self.outbox.recover(platforms=platforms, since=since)
        if report.found:
            log.warning(
                "%s: %d message(s) were interrupted by a previous stop%s: %d failed with no "
                "reply, %d reply(ies) delivered to the history, %d left to send, %d too old "
                "(failed)",
                self.character.name,
                report.found,
                f" ({', '.join(sorted(platforms.only))})" if platforms.only else "",
                report.interrupted,
                report.delivered,
                report.waiting,
                report.expired,
            )
        return report.found

    # -- turns ----------------------------------------------------------------------------------
    def load(self) -> Load:
        """How many turns wait at the gates and how long a new one would wait: a client asks
        before it hands a message over (the API answers 429 when :attr:`Load.overloaded`)."""
        return self.gates.load()

    async def handle(
        self, message: Message, *, on_chunk: ChunkCallback | None = None, pause: float = 0.0
    ) -> TurnResult:
        """Run one inbound message through the pipeline and return what to send.

        The message is stored before anything else. One turn runs at a time per room; a message
        that is still waiting when a newer one arrives in its room is superseded (stored, marked
        ``superseded``, not answered). An exception marks the message failed and propagates; a
        cancelled turn leaves it ``received`` for :meth:`recover`. Replies come back stored
        ``pending``, the message ``pending`` with them, until the client delivers them
        (:meth:`Outbox.deliver`).

        Busy stages admit a few turns at a time, in order of arrival (:attr:`gates`); ``pause``
        (seconds) holds the turn after its message is stored and before it queues for its room:
        a client's back-pressure when :meth:`load` says the agent is overloaded.
        """
        turn = Turn(runtime=self, message=message, on_chunk=on_chunk)
        timings: dict[str, float] = {}
        waits: dict[str, float] = {}
        turn.trace["timings_ms"] = timings  # where the turn's time went, stage by stage
        turn.trace["waits_ms"] = waits  # ...of which queued at the stage's gate
        started = time.perf_counter()
        async with self.gates.enter("store", waits):
            inbound = await self.message_manager.receive(turn)
        timings["receive"] = _ms_since(started)
        assert turn.room is not None
        if pause > 0:
            turn.trace["paused_ms"] = round(pause * 1000, 3)
            await asyncio.sleep(pause)
        slot = self._rooms.setdefault(turn.room.id, _RoomSlot())
        slot.latest = inbound.id
        slot.users += 1
        try:
            async with slot.lock:
                if slot.latest != inbound.id:
                    turn.end(
                        "superseded by a newer message in the room", status=MemoryStatus.SUPERSEDED
                    )
                    await self.store.set_memory_status(inbound.id, MemoryStatus.SUPERSEDED)
                    return self._result(turn)
                try:
                    # One deadline for every model call of the turn, from here: the answer, its
                    # repair, the answer after tools (carrier.llm.deadline).
                    with model_deadline(self.model.deadline):
                        for stage in self.stages:
                            started = time.perf_counter()
                            # The message stage enters its own gate (see ``gates``).
                            gate = None if stage is self.message_manager else stage.name
                            async with self.gates.enter(gate, waits):
                                await stage.process(turn)
                            timings[stage.name] = _ms_since(started)
                            if turn.ended:
                                break
                        started = time.perf_counter()
                        async with self.gates.enter(self.closer.name, waits):
                            await self.closer.process(turn)
                        timings[self.closer.name] = _ms_since(started)
                        # Last, so that the hooks see the whole turn (its timings included).
                        await run_hooks(
                            self.registry.hooks_for(HookPoint.ON_TURN_END),
                            HookPoint.ON_TURN_END,
                            turn,
                        )
                except Exception as exc:
                    log.exception("%s: turn failed for message %s", self.character.name, inbound.id)
                    error = f"{type(exc).__name__}: {exc}"
                    # Replies this turn stored are not to be sent: failed with the turn, so the
                    # message and its replies agree.
                    await self.outbox.fail(inbound.id, error)
                    # The message's vector, if the turn made it, is kept with the status.
                    await self.store.record_turn(
                        inbound, MemoryStatus.FAILED, error=error, vector=turn.vector_unsaved
                    )
                    raise
        finally:
            slot.users -= 1
            if slot.users == 0:
                self._rooms.pop(turn.room.id, None)
            # What the turn stored is indexed after it (Store.catch_up), before a search must.
            self.background.submit(("catch_up", ""), self._catch_up)
        return self._result(turn)

    async def _catch_up(self) -> None:
        await self.store.catch_up()

    async def forget(self, entity_id: str) -> ForgetReport:
        """Delete what this agent keeps of a person: their memories, the agent's replies to them,
        summaries that retell them, their entity record (see
        :func:`carrier.memory.rights.forget_entity`)."""
        from carrier.audit.base import audit_from
        from carrier.memory.rights import forget_entity

        report = await forget_entity(
            self.store,
            agent_id=self.agent_id,
            entity_id=entity_id,
            audit=audit_from(self.services),
        )
        self.message_manager.forget(entity_id)  # their records are gone: written anew next time
        self._composer.forget()  # nor are their messages (or the replies to them) kept in memory
        return report

    async def observe(self, message: Message, *, reason: str) -> Memory:
        """Keep a message the agent is not to answer as conversation: stored (``ignored``;
        ``reason`` in ``content.metadata["observed"]``) and embedded, so it shows in the room's
        history and is recalled later, with no model call and no reply. For traffic a client
        sees but passes over (a channel where the bot answers only when mentioned). It never
        supersedes a turn waiting in its room."""
        # Stored and embedded like a turn's message, so it passes the message stage's gate.
        async with self.gates.enter(self.message_manager.name):
            return await self.message_manager.observe(Turn(runtime=self, message=message), reason)

    def _result(self, turn: Turn) -> TurnResult:
        assert turn.inbound is not None
        response = turn.response
        return TurnResult(
            status=turn.final_status,
            inbound_id=turn.inbound.id,
            replies=list(turn.replies),
            reason=turn.ended,
            thought=response.thought if response is not None else "",
            actions=list(turn.trace.get("actions", {}).get("results", [])),
            usage=turn.usage,
            offline=turn.offline,
            trace=turn.trace,
        )

    async def generate_after_tools(self, turn: Turn) -> tuple[ParsedResponse, list[dict[str, Any]]]:
        """The model's next answer once tool outputs are in the conversation: the parsed answer and
        any further tool calls."""
        request = ModelRequest(
            messages=[*turn.prompt, *turn.tool_messages],
            purpose="response",
            query=turn.text,
            context={"sender_name": turn.message.author.name, "after_tools": True},
            tools=offered_tools(turn) or None,
        )
        result, parsed = await self._generator.complete(turn, request, stream=False)
        return parsed, list(result.tool_calls)

    async def generate_continuation(self, turn: Turn, previous: list[str]) -> ParsedResponse:
        """One more message after the ones already written this turn (the CONTINUE action)."""
        values = dict(turn.state.values)
        values["responseFormat"] = format_instructions(turn.state.named_actions)
        sent = "\n".join(f"{self.character.name}: {t}" for t in previous)
        # The turn's own prompt (system + data), then what was sent and the follow-up ask.
        follow = render_system(
            template_for("continueMessageHandlerTemplate", self.character.templates), values
        )
        request = ModelRequest(
            messages=[
                *turn.prompt,
                ChatMessage(role="assistant", content=sent),
                ChatMessage(role="user", content=follow),
            ],
            purpose="response",
            query=turn.text,
            context={"continuation": True, "sender_name": turn.message.author.name},
        )
        if self.model.offline:
            return parse_response("")  # the offline provider has nothing more to say
        result = await self.model.generate(request)
        turn.usage.add(result.usage)
        return parse_response(result.text)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
