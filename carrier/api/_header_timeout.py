"""A deadline for a request's headers, which uvicorn does not have.

uvicorn's keep-alive timer starts only after a first response, and any byte received cancels it:
a connection that sends nothing, or sends its headers a byte at a time, stays open for ever, so
a few hundred of them exhaust the process's file descriptors (slowloris). The protocol classes
here arm a timer whenever the server waits for a request's headers (a new connection, and after
each response) and close the connection when it fires before the headers are complete. Both of
uvicorn's HTTP/1.1 protocols set ``self.cycle`` to a new request/response cycle the moment a
request's headers are parsed, which is what the timer watches; a long streamed reply or a slow
upload body is not affected.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["header_timeout_protocol"]


class _HeaderDeadline:
    """Mixed into a uvicorn HTTP protocol class; ``header_timeout`` is set on the subclass."""

    header_timeout: float = 10.0
    # What the uvicorn protocol provides.
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    _header_timer: asyncio.TimerHandle | None = None
    _waiting_since: Any = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self._header_timer is not None and self.cycle is not self._waiting_since:
            self._disarm()  # a request's headers are complete

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        # Waiting for the next request's headers, unless a pipelined one is already in.
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm(self) -> None:
        self._disarm()
        self._waiting_since = self.cycle
        self._header_timer = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expired(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return  # closed already, or handed over (a websocket upgrade)
        if self.cycle is self._waiting_since:
            self.transport.close()


def header_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (httptools when installed, else h11) with a ``seconds``
    deadline for each request's headers; pass it as ``uvicorn.Config(http=...)``."""
    base: type[Any]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is optional; h11 comes with uvicorn
        base = H11Protocol
    else:
        base = HttpToolsProtocol
    return type(
        f"HeaderDeadline{base.__name__}", (_HeaderDeadline, base), {"header_timeout": seconds}
    )
