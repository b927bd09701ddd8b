"""Recent log lines per agent, kept in memory for the console's live log tail.

``carrier run`` and ``carrier serve`` install a :class:`LogTailHandler` on the root logger
(:func:`install_log_tail`); each record it sees is attributed to an agent, redacted, and kept in
that agent's bounded ring (the oldest line goes when it is full), and handed to whoever follows
that agent's tail (``GET /agents/{id}/logs/stream``). Nothing is written anywhere: a restart
starts with empty rings.

How a record is attributed (first that applies), without the runtime knowing about the tail:

1. an ``agent_id`` attribute on the record (``log.info(..., extra={"agent_id": id})``);
2. the agent set for the current context with :func:`agent_logs` (a contextvar, so tasks
   started inside inherit it): the clients set it around what they do for their agent (the
   Discord client around its connection, whose event handlers run in tasks it starts; the
   Instagram client around its start and its job handlers, through :func:`job_logs`), so
   their lines need not name the agent;
3. the text names a running agent: its id anywhere in it, or its name as the line's prefix
   (``"Ada: no answer from the model: ..."``, as the pipeline logs turn failures).

A record none of these attribute is kept in the host's ring (``agent_id`` None), which no agent
token can read. Every line is put through the process-wide redactor before it is kept, so a
secret that reaches a log record never reaches a tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from carrier.safety.redact import redact_text

__all__ = [
    "LEVELS",
    "LogLine",
    "LogTail",
    "LogTailHandler",
    "agent_logs",
    "install_log_tail",
    "job_logs",
    "level_number",
    "tail_agent_logs",
]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""The level names a tail can be filtered by (a line at or above the one asked for passes)."""

DEFAULT_CAPACITY = 500
"""Lines kept per agent: a few screens, a few hundred KB at most for a busy host."""

_AGENT: ContextVar[str | None] = ContextVar("carrier_log_agent", default=None)
_FORMATTER = logging.Formatter()


def level_number(name: str) -> int:
    """``"warning"`` -> 30; a ValueError naming the choices for anything else."""
    upper = name.upper()
    if upper not in LEVELS:
        raise ValueError(f"unknown log level {name!r}; use one of {', '.join(LEVELS)}")
    return int(logging.getLevelName(upper))


@contextlib.contextmanager
def agent_logs(agent_id: str) -> Iterator[None]:
    """Attribute what is logged inside the block (and in tasks it starts) to ``agent_id``."""
    reset = _AGENT.set(agent_id)
    try:
        yield
    finally:
        _AGENT.reset(reset)


class _OfAgent(Protocol):
    @property
    def agent_id(self) -> str | None: ...


_J = TypeVar("_J", bound=_OfAgent)
_C = TypeVar("_C")
_R = TypeVar("_R")


def job_logs(
    handler: Callable[[_J, _C], Awaitable[_R]],
) -> Callable[[_J, _C], Awaitable[_R]]:
    """A job handler (``handler(job, ctx)``) whose log lines are attributed to its job's agent
    (``job.agent_id``, when the job has one)::

        service.worker.register(KIND, job_logs(handlers.publish))
    """

    @functools.wraps(handler)
    async def attributed(job: _J, ctx: _C) -> _R:
        if not job.agent_id:
            return await handler(job, ctx)
        with agent_logs(job.agent_id):
            return await handler(job, ctx)

    return attributed


@dataclass(frozen=True, slots=True)
class LogLine:
    """One log record as a tail shows it: already redacted."""

    seq: int
    """Increasing across the process: a client that reconnects asks for lines after it."""
    at: str
    level: str
    levelno: int
    logger: str
    agent_id: str | None
    message: str
    """The formatted message, then the traceback if there was one."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Follower:
    """One open tail: a queue filled from whatever thread logs, drained by its event loop."""

    def __init__(self, agent_id: str, loop: asyncio.AbstractEventLoop, limit: int) -> None:
        self.agent_id = agent_id
        self.loop = loop
        self.queue: asyncio.Queue[LogLine] = asyncio.Queue(maxsize=limit)

    def offer(self, line: LogLine) -> None:
        """Called on the follower's loop: a follower that does not keep up loses the newest
        lines rather than holding memory without bound (they stay in the ring, where
        ``recent(after=seq)`` finds them)."""
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(line)


class LogTail:
    """The rings of recent lines, one per agent (and one for the host), and their followers.

    ``agents`` returns the running agents as ``{agent_id: name}``, read for records that carry
    no agent (see the module's docstring)."""

    def __init__(
        self,
        *,
        agents: Callable[[], Mapping[str, str]] = dict,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self._agents = agents
        self.capacity = capacity
        self._rings: dict[str | None, deque[LogLine]] = {}
        self._followers: list[_Follower] = []
        self._lock = threading.Lock()
        self._seq = itertools.count(1)

    def attribute(self, record: logging.LogRecord, message: str) -> str | None:
        given = getattr(record, "agent_id", None)
        if isinstance(given, str) and given:
            return given
        current = _AGENT.get()
        if current is not None:
            return current
        try:
            agents = dict(self._agents())
        except Exception:  # the tail never breaks logging
            return None
        for agent_id, name in agents.items():
            if agent_id in message or (name and message.startswith(f"{name}:")):
                return agent_id
        return None

    def add(self, record: logging.LogRecord) -> LogLine:
        """Keep ``record`` (redacted) in its agent's ring and hand it to that agent's followers."""
        try:
            message = record.getMessage()
        except Exception:  # bad arguments: keep the template rather than lose the line
            message = str(record.msg)
        if record.exc_info and record.exc_info[0] is not None:
            message += "\n" + (record.exc_text or _FORMATTER.formatException(record.exc_info))
        elif record.exc_text:
            message += "\n" + record.exc_text
        agent_id = self.attribute(record, message)
        # Redacted before the lock: the redactor reports what it found, which may log.
        message = redact_text(message, where=None)
        with self._lock:
            line = LogLine(
                seq=next(self._seq),
                at=datetime.fromtimestamp(record.created, UTC).isoformat(),
                level=record.levelname,
                levelno=record.levelno,
                logger=record.name,
                agent_id=agent_id,
                message=message,
            )
            ring = self._rings.get(agent_id)
            if ring is None:
                ring = self._rings[agent_id] = deque(maxlen=self.capacity)
            ring.append(line)
            followers = [f for f in self._followers if f.agent_id == agent_id]
        for follower in followers:
            with contextlib.suppress(RuntimeError):  # its loop has closed
                follower.loop.call_soon_threadsafe(follower.offer, line)
        return line

    def recent(self, agent_id: str | None, *, level: int = 0, after: int = 0) -> list[LogLine]:
        """The agent's kept lines at ``level`` or above with ``seq`` after ``after``, oldest
        first."""
        with self._lock:
            ring = list(self._rings.get(agent_id, ()))
        return [line for line in ring if line.levelno >= level and line.seq > after]

    @contextlib.asynccontextmanager
    async def follow(self, agent_id: str) -> Any:
        """An ``asyncio.Queue`` of the agent's lines from now on, while the block runs."""
        follower = _Follower(agent_id, asyncio.get_running_loop(), self.capacity)
        with self._lock:
            self._followers.append(follower)
        try:
            yield follower.queue
        finally:
            with self._lock:
                self._followers.remove(follower)

    def forget(self, agent_id: str) -> None:
        """Drop an agent's ring (the agent was deleted)."""
        with self._lock:
            self._rings.pop(agent_id, None)


class LogTailHandler(logging.Handler):
    """Feeds every record it is given to a :class:`LogTail`; never raises into the logger."""

    def __init__(self, tail: LogTail, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.tail = tail

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.tail.add(record)
        except Exception:
            self.handleError(record)


def install_log_tail(
    agents: Callable[[], Mapping[str, str]], *, capacity: int = DEFAULT_CAPACITY
) -> tuple[LogTail, Callable[[], None]]:
    """A tail fed by a handler on the root logger; returns it and a function that takes the
    handler off again."""
    tail = LogTail(agents=agents, capacity=capacity)
    handler = LogTailHandler(tail)
    root = logging.getLogger()
    root.addHandler(handler)
    return tail, lambda: root.removeHandler(handler)


def tail_agent_logs(manager: Any) -> Callable[[], None]:
    """Install a tail for an agent manager's host (``carrier run``, ``carrier serve``): records
    are attributed among its running agents, and the API finds the tail in
    ``manager.services["logs"]``. Returns the function that takes it off."""

    def running() -> dict[str, str]:
        return {aid: r.runtime.character.name for aid, r in manager.running_items()}

    tail, uninstall = install_log_tail(running)
    manager.services["logs"] = tail
    return uninstall
