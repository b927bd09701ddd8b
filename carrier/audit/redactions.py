"""Redactions in the audit log: how many secrets the redactor kept from leaving, by exit.

The redactor (:mod:`carrier.safety.redact`) tells its listeners about every redaction, from any
thread (the logging filter runs wherever a record is logged). Writing one audit entry per
redaction would let a chatty failure (a provider key in every retried request's log line) flood
the log, so :class:`RedactionRecorder` sums them per exit (``where``: ``api``, ``discord``,
``log``, ``model``, ...) and writes one ``safety.redaction`` event per exit every
``interval_s`` seconds that saw any, and on stop: the count and the kinds of secret, never a value.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from carrier.audit.base import AuditLog
from carrier.audit.model import AuditKind

__all__ = ["RedactionRecorder"]

log = logging.getLogger(__name__)

SYSTEM = "system"


@dataclass
class _Tally:
    count: int = 0
    events: int = 0
    kinds: set[str] = field(default_factory=set)


class RedactionRecorder:
    """Subscribes to every redactor of the process; records sums in ``audit``."""

    def __init__(self, audit: AuditLog, *, interval_s: float = 60.0) -> None:
        self.audit = audit
        self.interval_s = interval_s
        self._pending: dict[str, _Tally] = {}
        self._lock = threading.Lock()
        self._unsubscribe: Callable[[], None] | None = None
        self._task: asyncio.Task[None] | None = None

    def heard(self, event: Any) -> None:
        """The redactor's listener (a ``RedactionEvent``): counted, from any thread."""
        with self._lock:
            tally = self._pending.setdefault(str(event.where), _Tally())
            tally.count += int(event.count)
            tally.events += 1
            tally.kinds.update(str(kind) for kind in event.kinds)

    def start(self) -> None:
        """Listen to the redactor and flush every ``interval_s`` (call it on the host's loop)."""
        if self._unsubscribe is not None:
            return
        from carrier.safety.redact import on_redaction

        self._unsubscribe = on_redaction(self.heard)
        self._task = asyncio.create_task(self._loop(), name="carrier audit redactions")

    async def stop(self) -> None:
        """Stop listening; what was heard is recorded."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()

    async def flush(self) -> int:
        """Record what was heard since the last flush; returns how many events were written."""
        with self._lock:
            pending, self._pending = self._pending, {}
        for where, tally in sorted(pending.items()):
            await self.audit.record(
                AuditKind.SAFETY_REDACTION,
                actor=SYSTEM,
                action=f"redacted in {where}",
                target=where,
                detail={
                    "where": where,
                    "secrets": tally.count,
                    "redactions": tally.events,
                    "kinds": sorted(tally.kinds),
                },
            )
        return len(pending)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.flush()
            except Exception:  # record() never raises; this is a last guard for the loop
                log.exception("audit: recording redactions failed")
