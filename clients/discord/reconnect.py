"""Keeping one bot connected, for as long as the client runs: discord.py's reconnects, and ours
around them.

What discord.py 2.x does by itself, in ``Client.connect(reconnect=True)``: once a gateway
connection exists, a dropped one is resumed (Discord's reconnect request, the close codes it can
handle, a reset connection), and an attempt that fails is retried after its own exponential
backoff with full jitter, which grows to 2**10 s. What ends ``login``/``connect`` instead, and so
would leave the bot offline until a restart:

- any failure of ``login``'s REST calls (DNS, a refused connection, a 5xx): not retried;
- a first gateway connection that fails: its retry path reads the websocket it never had and
  raises ``AttributeError`` (discord.py issue #10520), the real error as its ``__context__``;
- the close codes it cannot handle (4004 authentication failed, 4010-4013, and 4014 as
  ``PrivilegedIntentsRequired``), and a refused token (``LoginFailure``, HTTP 401).

:class:`Reconnector` runs ``login`` then ``connect(reconnect=True)`` in a loop: whatever ends them
that retrying can cure is retried with capped exponential backoff with jitter (about 1 s, then
doubling up to 60 s: ``clientConfig.discord.reconnect``), forever; what retrying cannot cure
(the token or intents refused, :func:`~clients.discord.errors.is_refusal`) ends the loop with the
state ``failed`` and the fix in ``last_error``. It does not keep retrying those: the same token
would be refused again, and each refused identify counts against the bot's daily limit; the
operator fixes the token and starts the agent again.

discord.py's own retries stay in charge while they are quick, so a drop is resumed (the events
of the gap replayed by Discord) and the HTTP session stays open for turns in flight. Once its
backoff outgrows ours (nothing heard for ``maxSeconds`` while disconnected), the connection is
started afresh here instead, so a long outage ends with a connection within the cap. Not for a
sharded bot: restarting ``AutoShardedClient.connect`` would launch its shards twice, so its
shards keep discord.py's own reconnects (and its launch retries every 5 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import discord
from discord.utils import MISSING

from carrier.clients import ClientStateTracker, ClientStatus
from carrier.jobs.backoff import Backoff
from clients.discord.config import ReconnectPolicy
from clients.discord.connection import on_failed_attempts
from clients.discord.errors import describe_start_failure, is_refusal, real_error

__all__ = ["Reconnector"]

log = logging.getLogger(__name__)

_LOGIN_SECONDS = 60.0
"""A login that hangs (a network that drops packets) is an attempt that failed."""


class _Stalled(Exception):
    """discord.py has been silent longer than the cap while disconnected."""


class Reconnector:
    """The connection loop of one bot; its state is ``tracker``'s. Run :meth:`run` in a task
    and cancel it to stop (after closing the bot); the client feeds it the gateway's events
    (:meth:`up`, :meth:`down`)."""

    def __init__(
        self,
        *,
        bot: discord.Client,
        token: str,
        policy: ReconnectPolicy,
        tracker: ClientStateTracker,
        members_intent: bool = False,
    ) -> None:
        self.bot = bot
        self.tracker = tracker
        self.refusal: BaseException | None = None
        """What refused the bot for good, once the loop ended on it."""
        self._token = token
        self._policy = policy
        self._backoff = Backoff(
            base_s=policy.initial_seconds, cap_s=policy.max_seconds, factor=2.0, jitter=0.5
        )
        self._members = members_intent
        self._watch = not isinstance(bot, discord.AutoShardedClient)
        self._logged_in = False
        self._failures = 0
        self._down_at: float | None = None
        self._reported = False
        """The failure that ended ``connect`` was told by discord.py's log already."""
        self._changed = asyncio.Event()

    # -- the gateway's events, from the client ---------------------------------------------------
    def up(self) -> None:
        """Connected (ready or resumed)."""
        self._down_at = None
        self._failures = 0
        self.tracker.connected()
        self._poke()

    def down(self) -> None:
        """An attempt failed or the connection dropped: discord.py is reconnecting (or its
        ``connect`` is about to end, and the loop takes over)."""
        self._down_at = time.monotonic()
        if self.tracker.state.status == ClientStatus.CONNECTED:
            self.tracker.retrying("the connection to the Discord gateway was lost; reconnecting")
        self._poke()

    def _failed_attempt(self, exc: BaseException, delay: float | None) -> None:
        """discord.py's own reconnect failed an attempt and waits ``delay`` s (at most the cap:
        the loop takes over then)."""
        self._down_at = time.monotonic()
        self._reported = True
        if delay is not None:
            delay = min(delay, self._policy.max_seconds) if self._watch else delay
        self.tracker.retrying(self._describe(exc), delay=delay)
        self._poke()

    def _poke(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- the loop ----------------------------------------------------------------------------------
    async def run(self) -> None:
        """Connect and keep connected until cancelled, the bot is closed, or refused for good."""
        while not self.bot.is_closed():
            self.tracker.attempting()
            error: Exception | None = None
            try:
                if not self._logged_in:
                    await self._login()
                await self._connect()
            except Exception as exc:
                error = exc
            if error is not None and is_refusal(error):
                await self._refused(error)
                return
            if self.bot.is_closed():
                return  # stopped meanwhile
            self._failures += 1
            if isinstance(error, _Stalled):
                # Waited out already (the cap, in silence): at once, keeping the last error
                # discord.py met as the state's.
                self.tracker.retrying(None, delay=0.0, counted=True)
                log.info("discord: %s", error)
                continue
            delay = self._backoff.delay(self._failures)
            reason = self._describe(error)
            # A failure discord.py logged before its connect ended (#10520) is counted once.
            self.tracker.retrying(reason, delay=delay, counted=self._reported)
            log.warning(
                "discord: %s; retrying in %.1f s (attempt %d)", reason, delay, self._failures + 1
            )
            await asyncio.sleep(delay)

    async def _login(self) -> None:
        try:
            async with asyncio.timeout(_LOGIN_SECONDS):
                await self.bot.login(self._token)
        except BaseException:
            # ``login`` opened an HTTP session (its connector owned by it) and leaves it open
            # when it fails: close it, and let the next attempt make a new connector, since
            # discord.py would reuse the closed one.
            await self.bot.http.close()
            self.bot.http.connector = MISSING
            raise
        self._logged_in = True

    async def _connect(self) -> None:
        # discord.py dispatches ``disconnect`` before its connect ends, so the previous
        # attempt's is in already: the silence is counted from this attempt's failures only.
        self._down_at = None
        self._reported = False
        task = asyncio.create_task(self.bot.connect(reconnect=True), name="discord-connect")
        on_failed_attempts(task, self._failed_attempt)
        try:
            while not task.done():
                changed = asyncio.create_task(self._changed.wait())
                done, _ = await asyncio.wait(
                    {task, changed}, timeout=self._silence(), return_when=asyncio.FIRST_COMPLETED
                )
                changed.cancel()
                if not done and self._stalled():
                    raise _Stalled(
                        f"discord.py waits longer than {self._policy.max_seconds:g} s to "
                        "reconnect; connecting again now"
                    )
            task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def _silence(self) -> float | None:
        """How long discord.py may stay silent from now while disconnected."""
        if not self._watch or self._down_at is None:
            return None
        return max(0.0, self._down_at + self._policy.max_seconds - time.monotonic())

    def _stalled(self) -> bool:
        silence = self._silence()
        return silence is not None and silence <= 0

    async def _refused(self, exc: BaseException) -> None:
        self.refusal = exc
        reason = describe_start_failure(real_error(exc), members=self._members)
        self.tracker.failed(reason)
        log.error("discord: %s", reason)
        with contextlib.suppress(Exception):
            await self.bot.close()

    def _describe(self, error: BaseException | None) -> str:
        if error is None:
            return "the Discord connection ended"
        return describe_start_failure(real_error(error), members=self._members)
