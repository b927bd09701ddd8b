"""The discord.py client for one agent: explicit intents, safe default mentions, sharding."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import discord

from clients.discord.config import DiscordConfig
from clients.discord.sender import allowed_mentions

__all__ = [
    "RetryListener",
    "build_bot",
    "build_intents",
    "on_failed_attempts",
    "quiet_reconnect_tracebacks",
]


def build_intents(config: DiscordConfig) -> discord.Intents:
    """Exactly what the client uses: guilds, messages (with their content), reactions."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True  # privileged: enabled in the Developer Portal
    intents.guild_reactions = True
    intents.dm_reactions = True
    intents.members = config.members_intent  # privileged, off unless asked for
    return intents


def build_bot(config: DiscordConfig, options: Mapping[str, Any]) -> discord.Client:
    """A ``discord.Client``, or an ``AutoShardedClient`` when ``shards`` is set (``auto`` lets
    Discord recommend the count; ``shardIds`` runs only those shards of the count). discord.py resumes dropped connections; the client's
    :class:`~clients.discord.reconnect.Reconnector` keeps it connected around that."""
    kwargs: dict[str, Any] = {
        "intents": build_intents(config),
        "allowed_mentions": allowed_mentions(config),  # a safety net; every send passes its own
        "chunk_guilds_at_startup": config.members_intent,
        **options,
    }
    for flag in ("warn_nacl", "warn_dave"):  # Carrier never joins voice; skip those warnings
        if hasattr(discord.VoiceClient, flag):
            setattr(discord.VoiceClient, flag, False)
    if config.shards is None:
        return discord.Client(**kwargs)
    sharding = config.sharding
    if sharding is not None and config.shard_ids is not None:
        # Some shards of a count: the others run elsewhere.
        return discord.AutoShardedClient(shard_ids=sharding[0], shard_count=sharding[1], **kwargs)
    shard_count = None if config.shards == "auto" else config.shards
    return discord.AutoShardedClient(shard_count=shard_count, **kwargs)


RetryListener = Callable[[BaseException, float | None], None]
"""Told of each attempt discord.py's own reconnect loop failed: the error, and the seconds it
waits before the next one."""

_LISTENERS: weakref.WeakKeyDictionary[asyncio.Task[Any], RetryListener] = (
    weakref.WeakKeyDictionary()
)


def on_failed_attempts(task: asyncio.Task[Any], listener: RetryListener) -> None:
    """Call ``listener`` for each failed attempt discord.py logs while running in ``task`` (its
    ``connect``): discord.py reports those failures through its log only."""
    quiet_reconnect_tracebacks()
    _LISTENERS[task] = listener


class _Reconnects(logging.Filter):
    """discord.py logs each failed reconnect attempt at ERROR with a full traceback; during an
    outage that is one traceback a minute for hours. This keeps the line and the error (one
    line, at WARNING), since the client's own log line says what it does next, and tells the
    attempt to the connection loop running it (:func:`on_failed_attempts`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not (record.exc_info and str(record.msg).startswith("Attempting a reconnect")):
            return True
        exc = record.exc_info[1]
        args = record.args if isinstance(record.args, tuple) else ()
        if exc is not None:
            delay = args[-1] if args and isinstance(args[-1], int | float) else None
            self._tell(exc, float(delay) if delay is not None else None)
        record.msg = f"{record.msg} (after {type(exc).__name__}: %s)"
        record.args = (*args, exc)
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True

    @staticmethod
    def _tell(exc: BaseException, delay: float | None) -> None:
        try:
            task = asyncio.current_task()
        except RuntimeError:  # logged outside an event loop
            return
        listener = _LISTENERS.get(task) if task is not None else None
        if listener is not None:
            listener(exc, delay)


_FILTER = _Reconnects()


def quiet_reconnect_tracebacks() -> None:
    """Install :class:`_Reconnects` on discord.py's client and shard loggers (once)."""
    for name in ("discord.client", "discord.shard"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
