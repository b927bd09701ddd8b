"""``DiscordClient``: one agent's Discord connection, from gateway event to sent reply.

The discord.py client owns the connection (identify, heartbeats, resume, sharding), kept up for
as long as the client runs by :class:`~clients.discord.reconnect.Reconnector` (a gateway that
cannot be reached at start-up or after a drop is retried with capped backoff; the client's
``state`` says how it goes). This class decides which events reach the runtime, runs the turn
with the typing indicator on, and sends the answer back safely. A failing handler is logged and
counted and the next event is handled as usual. What the client logs, and everything logged
while it handles an event (the runtime's turn too), goes to its agent's log tail
(:func:`carrier.logtail.agent_logs`), whether or not the line names the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import discord
from discord import app_commands

from carrier.clients import Client, ClientRefused, ClientState, ClientStateTracker, ClientStatus
from carrier.jobs.model import Job
from carrier.logtail import agent_logs
from carrier.pipeline.generate import failure_of
from carrier.types import Memory
from clients.discord.approval import ApprovalDesk
from clients.discord.commands import SlashHandler, add_commands
from clients.discord.config import DiscordConfig, DiscordPolicy, parse_config
from clients.discord.connection import build_bot, quiet_reconnect_tracebacks
from clients.discord.convert import (
    channel_of,
    mentions_me,
    replies_to_me,
    to_message,
)
from clients.discord.errors import describe_start_failure, real_error
from clients.discord.policy import BotLoopGuard, Facts, RateLimiter, Verdict, gate, observed
from clients.discord.reactions import store_reaction
from clients.discord.reconnect import Reconnector
from clients.discord.resume import LeftBehind
from clients.discord.sender import Typing, send_reply

__all__ = ["ClientStats", "DiscordClient"]

log = logging.getLogger(__name__)

_CONVERSATION_TYPES = {discord.MessageType.default, discord.MessageType.reply}

OVERLOAD_PAUSE_S = 1.0
"""How long a turn pauses (after its message is stored) when the agent is overloaded: the
queue drains a little before it joins, and the person sees the bot typing meanwhile."""


@dataclass
class ClientStats:
    """Counters for logs, the API and tests."""

    events: int = 0
    """Message and reaction events that reached a handler."""
    turns: int = 0
    """Messages passed to the runtime."""
    observed: int = 0
    """Messages stored as conversation without a turn (mention-only channels)."""
    sent: int = 0
    """Discord messages sent (a long reply counts once per part)."""
    errors: int = 0
    rate_limited: int = 0
    overloaded: int = 0
    """Turns paused because the agent was overloaded (never refused: see ``overload_pause``)."""
    ignored: Counter[str] = field(default_factory=Counter)


class DiscordClient(Client):
    """Build with :func:`clients.discord.create_client`; ``discord_options`` go to the
    discord.py client unchanged (tests pass a short ``guild_ready_timeout``)."""

    name = "discord"

    def __init__(
        self,
        *,
        runtime: Any,
        token: str,
        config: DiscordConfig,
        discord_options: Mapping[str, Any] | None = None,
        ready_timeout: float = 60.0,
        stop_grace: float = 10.0,
    ) -> None:
        self.runtime = runtime
        self.config = config
        self.stats = ClientStats()
        self._token = token
        self._ready_timeout = ready_timeout
        self._stop_grace = stop_grace
        self._loop_guard = BotLoopGuard()
        self._limiter = RateLimiter()
        self._checks = 0
        self._inflight: set[asyncio.Task[Any]] = set()
        self._replies: OrderedDict[int, str] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._tracker = ClientStateTracker()
        self.overload_pause = OVERLOAD_PAUSE_S
        """Seconds a turn waits, once its message is stored, when the agent is overloaded."""
        self._left = LeftBehind(self)
        """What a previous holder of the connection left: messages and replies."""
        self.bot = build_bot(self.config, discord_options or {})
        quiet_reconnect_tracebacks()
        self._connection = Reconnector(
            bot=self.bot,
            token=token,
            policy=self.config.reconnect,
            tracker=self._tracker,
            members_intent=self.config.members_intent,
        )
        # What ``@bot.event`` does: discord.py dispatches to ``on_<event>`` attributes.
        self.bot.on_ready = self._on_ready  # type: ignore[attr-defined]
        self.bot.on_resumed = self._on_resumed  # type: ignore[attr-defined]
        self.bot.on_disconnect = self._on_disconnect  # type: ignore[attr-defined]
        self.bot.on_message = self._on_message  # type: ignore[attr-defined]
        self.bot.on_raw_reaction_add = self._on_raw_reaction_add  # type: ignore[attr-defined]
        self.bot.on_error = self._on_error  # type: ignore[method-assign]
        self.tree = app_commands.CommandTree(self.bot)
        handler = SlashHandler(self)
        self.tree.on_error = handler.on_error  # type: ignore[method-assign]
        add_commands(self.tree, handler)
        self.approvals = ApprovalDesk(self)  # drafts with Approve/Reject buttons (approval.py)

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """The connection loop is alive: connected, connecting or waiting to retry (it ends on
        stop, or when Discord refused the bot for good: ``state`` is then ``failed``)."""
        return self._task is not None and not self._task.done()

    @property
    def state(self) -> ClientState:
        """Connected, connecting, retrying (since when, the last error, the next attempt) or
        failed (the fix in ``last_error``)."""
        return self._tracker.state

    @property
    def busy(self) -> bool:
        """A turn or reaction is being handled right now."""
        return bool(self._inflight)

    async def start(self) -> None:
        """Start connecting in the background and return once Discord says the bot is ready,
        once a first attempt failed (the state is then ``retrying``: the connection keeps being
        tried, and comes up without a restart), or after ``ready_timeout``. A refused token or
        refused intents raise :class:`ClientRefused` with the fix: retrying cannot help. A
        stopped client is not started again: build a new one."""
        with self._logs():
            await self._start()

    def _logs(self) -> contextlib.AbstractContextManager[None]:
        """Attribute what is logged inside to this client's agent (tasks started inside too)."""
        return agent_logs(str(self.runtime.character.agent_id))

    async def _start(self) -> None:
        if self._closing:
            raise RuntimeError("this Discord client was stopped; create a new one to reconnect")
        if self._task is not None:
            return
        # Started inside _logs(): the task copies the context, and so does every task
        # discord.py starts from it (each event's handler), so their lines are the agent's.
        task = asyncio.create_task(
            self._connection.run(), name=f"discord:{self.runtime.character.name}"
        )
        task.add_done_callback(self._connection_ended)
        self._task = task
        waiter = asyncio.create_task(
            self._tracker.wait_for(lambda state: state.status is not ClientStatus.CONNECTING)
        )
        done, _ = await asyncio.wait(
            {task, waiter}, timeout=self._ready_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()
        state = self.state
        if self._closing:
            return
        if state.status is ClientStatus.FAILED or (task in done and not task.cancelled()):
            refusal = self._connection.refusal or (None if task.cancelled() else task.exception())
            self._task = None
            await self.bot.close()
            raise ClientRefused(
                describe_start_failure(refusal, members=self.config.members_intent)
            ) from (real_error(refusal) if refusal is not None else None)
        if state.status is ClientStatus.RETRYING:
            log.warning(
                "discord: %s is not connected yet (%s); retrying in the background",
                self.runtime.character.name,
                state.last_error,
            )
        elif not done:
            log.warning(
                "discord: not ready after %.0fs; still connecting in the background",
                self._ready_timeout,
            )

    async def abandon(self) -> None:
        """The lease was lost: another process may connect the bot now. Close at once (running
        turns cancelled, their messages left for the new holder to run again) rather than let
        them finish while two sessions are open."""
        self._stop_grace = 0.0
        await self.stop()

    def _connection_ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:  # a bug in the loop: say so, and show the client as failed
            log.error("discord: the connection loop stopped", exc_info=exc)
            self._tracker.failed(f"the connection loop stopped: {type(exc).__name__}: {exc}")

    async def stop(self) -> None:
        """Stop taking new events, let running turns finish (up to ``stop_grace`` seconds, then
        cancel them: the runtime leaves them ``received`` for recovery), then disconnect. A
        connection loop waiting to retry stops at once."""
        with self._logs():
            await self._stop()

    async def _stop(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._inflight:
            _, pending = await asyncio.wait(set(self._inflight), timeout=self._stop_grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=2)
        await self.bot.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                try:
                    await asyncio.wait_for(self._task, timeout=10)
                except Exception as exc:  # the connection is going away; nothing else to do
                    log.debug("discord: connection task ended with %s", type(exc).__name__)
        log.info("discord: %s stopped (%s)", self.runtime.character.name, self.stats)

    def update_config(self, new: Mapping[str, Any] | DiscordConfig) -> DiscordConfig:
        """Apply a new ``clientConfig.discord`` without restarting (raises ConfigError when
        invalid). Shards and intents are connection settings: they apply at the next start."""
        config = new if isinstance(new, DiscordConfig) else parse_config(new)
        if (config.shards, config.shard_ids, config.members_intent, config.reconnect) != (
            self.config.shards,
            self.config.shard_ids,
            self.config.members_intent,
            self.config.reconnect,
        ):
            log.warning(
                "discord: shards / membersIntent / reconnect changes take effect when the client "
                "restarts"
            )
        self.config = config
        return config

    async def request_approval(self, job: Job) -> str | None:
        """Post ``job``'s draft in the approval channel with Approve/Reject buttons; the message
        id, or ``None`` without ``approvalChannel`` (see :mod:`clients.discord.approval`)."""
        return await self.approvals.post_draft(job)

    def check_rate(self, user_id: int, policy: DiscordPolicy) -> Verdict:
        """Count one turn for ``user_id`` against the per-user limit."""
        self._checks += 1
        if self._checks % 10_000 == 0:
            self._limiter.prune()
        verdict = self._limiter.check(str(user_id), policy.rate_limit)
        if verdict is not Verdict.ALLOW:
            self.stats.rate_limited += 1
        return verdict

    def policy_for(self, guild: discord.Guild | None) -> DiscordPolicy:
        return self.config.for_guild(guild.id if guild is not None else None)

    # -- events -----------------------------------------------------------------------------
    async def _on_ready(self) -> None:
        user = self.bot.user
        log.info(
            "discord: %s connected as %s (%s guilds)",
            self.runtime.character.name,
            user,
            len(self.bot.guilds),
        )
        self._connection.up()
        # What a stopped process left, still fresh: its unanswered messages run again, its
        # unsent replies sent, once (clients/discord/resume.py). In the background, tracked like
        # a turn (``stop`` waits for it); after a reconnect it finds what is left, which is
        # nothing once they are done.
        task = asyncio.create_task(self._left.settle(), name="discord-redeliver")
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _on_resumed(self) -> None:
        log.info("discord: %s resumed its connection", self.runtime.character.name)
        self._connection.up()

    async def _on_disconnect(self) -> None:
        if not self._closing:
            self._connection.down()

    def resume(self, messages: list[Memory]) -> None:
        """Run these messages, which a previous holder of the connection left unanswered,
        again once connected (:mod:`clients.discord.resume`)."""
        self._left.add(messages)

    async def _on_error(self, event: str, *args: Any, **kwargs: Any) -> None:
        self.stats.errors += 1
        log.exception("discord: error in the %s handler; carrying on", event)

    @contextlib.contextmanager
    def _tracked(self) -> Iterator[None]:
        """Count the current handler as in flight (``busy``; ``stop`` waits for it); its lines
        are the agent's."""
        self.stats.events += 1
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            with self._logs():
                yield
        finally:
            if task is not None:
                self._inflight.discard(task)

    async def _on_message(self, message: discord.Message) -> None:
        with self._tracked():
            try:
                await self._handle_message(message)
            except Exception:
                self.stats.errors += 1
                log.exception(
                    "discord: failed to handle message %s in channel %s; carrying on",
                    message.id,
                    message.channel.id,
                )

    def _ignore(self, message: discord.Message, reason: str) -> None:
        self.stats.ignored[reason] += 1
        log.debug("discord: ignored message %s: %s", message.id, reason)

    async def _handle_message(self, message: discord.Message) -> None:
        me = self.bot.user
        if me is None or self._closing:
            return
        if message.author.id == me.id:
            return self._ignore(message, "own message")
        if message.type not in _CONVERSATION_TYPES:
            return self._ignore(message, f"system message ({message.type.name})")
        channel_key = str(message.channel.id)
        if not message.author.bot:
            self._loop_guard.person_spoke(channel_key)
        policy = self.policy_for(message.guild)
        channel = channel_of(message.channel, message.channel.id)
        parent = getattr(message.channel, "parent", None)
        addressed = mentions_me(message, me, self.runtime.names) or replies_to_me(message, me)
        facts = Facts(
            author_is_bot=message.author.bot,
            is_direct=message.guild is None,
            is_thread=channel.parent_platform_id is not None,
            addressed=addressed,
            channel_allowed=policy.allows_channel(
                (channel.platform_id, channel.name),
                (channel.parent_platform_id, getattr(parent, "name", None)),
            ),
        )
        reason = gate(facts, policy)
        if reason is not None:
            if observed(reason):
                await self._observe(message, policy, reason)
            return self._ignore(message, reason)
        if message.author.bot and not self._loop_guard.allow(channel_key, policy.max_bot_turns):
            return self._ignore(message, "bot loop: too many bot turns in a row")
        verdict = self.check_rate(message.author.id, policy)
        if verdict is not Verdict.ALLOW:
            notice = policy.rate_limit.notice if policy.rate_limit else ""
            if verdict is Verdict.NOTIFY and notice and (addressed or facts.is_direct):
                self.stats.sent += len(await send_reply(message, notice, policy))
            return self._ignore(message, "rate limited")
        await self._turn(message, policy, show_typing=addressed or facts.is_direct)

    async def _observe(self, message: discord.Message, policy: DiscordPolicy, reason: str) -> None:
        """Store a message the bot reads along but does not answer (no reply, no model call)."""
        me = self.bot.user
        assert me is not None
        inbound = await to_message(
            message, me=me, names=self.runtime.names, text_limit=policy.attachment_text_limit
        )
        try:
            await self.runtime.observe(inbound, reason=reason)
        except Exception:  # a store or embedding failure must not take the client down
            log.exception("discord: could not store message %s", message.id)
        else:
            self.stats.observed += 1

    async def _turn(
        self, message: discord.Message, policy: DiscordPolicy, *, show_typing: bool
    ) -> None:
        me = self.bot.user
        assert me is not None
        inbound = await to_message(
            message, me=me, names=self.runtime.names, text_limit=policy.attachment_text_limit
        )
        typing = Typing(message.channel)
        if show_typing:
            typing.start()

        async def on_chunk(_: str) -> None:
            typing.start()  # not addressed: show typing once the model has decided to answer

        # Overloaded (a turn would queue longer than the agent's bound), a person is not
        # refused, as the API refuses a caller: the message is stored at once as always, then
        # the turn pauses briefly before it queues, the typing indicator on if it was addressed.
        pause = 0.0
        if self.runtime.load().overloaded:
            self.stats.overloaded += 1
            pause = self.overload_pause
        self.stats.turns += 1
        try:
            result = await self.runtime.handle(inbound, on_chunk=on_chunk, pause=pause)
        finally:
            await typing.stop()
        failure = failure_of(result)
        if failure is not None:
            # No answer from the model: whoever it was answering reads the apology (not stored,
            # not in the persona's voice); the reason is the message's.
            if show_typing:
                self.stats.sent += len(await send_reply(message, failure.notice, policy))
            return
        first = result.replies[0].id if result.replies else None

        async def send(reply: Memory) -> None:
            sent = await send_reply(
                message, reply.content.text, policy, as_reply=reply.id == first, key=reply.id
            )
            self._count_sent(reply, sent)

        # Each reply is claimed, sent, then marked sent (or failed, with Discord's answer).
        await self.runtime.outbox.deliver(result.replies, send)

    def _count_sent(self, reply: Memory, sent: list[discord.Message]) -> None:
        self.stats.sent += len(sent)
        for part in sent:
            self._remember(part.id, reply.id)

    def _remember(self, discord_id: int, memory_id: str) -> None:
        self._replies[discord_id] = memory_id
        while len(self._replies) > 5000:
            self._replies.popitem(last=False)

    async def _on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        with self._tracked():
            me = self.bot.user
            if me is None or self._closing or payload.message_author_id != me.id:
                return  # only reactions to the bot's own messages are remembered
            user: discord.abc.User | None = payload.member or self.bot.get_user(payload.user_id)
            if payload.user_id == me.id or (user is not None and user.bot):
                return
            await store_reaction(
                self.runtime,
                channel_id=payload.channel_id,
                message_id=payload.message_id,
                user_id=payload.user_id,
                user_name=user.display_name if user is not None else str(payload.user_id),
                emoji=str(payload.emoji),
                reply_memory_id=self._replies.get(payload.message_id),
            )
