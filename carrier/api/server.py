"""Running the API on uvicorn, programmatically.

``serve()`` is ``carrier serve``: it runs until SIGINT/SIGTERM. ``api_server()`` runs it in the
background of other work (``carrier run``, tests, benchmarks) and yields its base URL. Both
refuse to listen beyond loopback when no ``CARRIER_ADMIN_TOKEN`` is set (the minted local token
is for the operator at this machine), and a port uvicorn cannot bind (taken since the callers'
own check) ends in a :class:`ConfigError` that says which ``--port`` to try, not in uvicorn's
``SystemExit``.

Connections are not kept for ever: a request's headers must arrive within
``CARRIER_HEADER_TIMEOUT`` seconds (:mod:`carrier.api._header_timeout`), and an idle keep-alive
connection is closed after ``CARRIER_KEEP_ALIVE_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from typing import Any

import uvicorn
from fastapi import APIRouter, FastAPI

from carrier.agents import AgentManager
from carrier.api._header_timeout import header_timeout_protocol
from carrier.api.app import create_app
from carrier.api.front_door import is_loopback
from carrier.api.readiness import Startup
from carrier.api.settings import ApiSettings
from carrier.errors import ConfigError
from carrier.ports import port_problem
from carrier.settings import MAKE_TOKEN, Settings

__all__ = ["api_server", "check_bind", "is_loopback", "running_app", "serve"]


def check_bind(host: str, settings: Settings) -> None:
    """Raise :class:`ConfigError` for a non-loopback ``host`` without ``CARRIER_ADMIN_TOKEN``:
    the local token minted into the data dir is the operator's on this machine, not a
    credential to publish a server with."""
    if settings.admin_token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without an admin token: set CARRIER_ADMIN_TOKEN "
            f"(make one with {MAKE_TOKEN}) or listen on 127.0.0.1"
        )


def _timeouts(app: FastAPI) -> tuple[float, int]:
    """The header and keep-alive timeouts of the app's API settings (the defaults for an app
    :func:`create_app` did not build)."""
    api = getattr(app.state, "api", None)
    limits = getattr(api, "api_settings", None)
    if not isinstance(limits, ApiSettings):
        limits = ApiSettings.model_construct()  # the defaults, no environment read
    return limits.header_timeout, limits.keep_alive_timeout


def _config(app: FastAPI, host: str, port: int, log_level: str) -> uvicorn.Config:
    header_timeout, keep_alive = _timeouts(app)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="off",
        log_config=None,  # keep the process's own logging set-up
        log_level=log_level.lower(),
        access_log=False,
        server_header=False,
        http=header_timeout_protocol(header_timeout),
        timeout_keep_alive=keep_alive,
        timeout_graceful_shutdown=5,
    )


class _Server(uvicorn.Server):
    """``carrier serve``'s server: calls ``ready(url)`` once it listens (the console's address is
    printed then), and stops cleanly on SIGINT/SIGTERM."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[str], None] | None = None):
        super().__init__(config)
        self.ready = ready

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """uvicorn's SIGINT/SIGTERM handling, without raising the signal again once the server
        has stopped: that would cancel ``carrier serve``'s clean-up (closing the store), and the
        store's thread would keep the process from exiting."""
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()

    async def startup(self, sockets: list[Any] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self.ready is not None:
            self.ready(self.url)

    @property
    def url(self) -> str:
        """``http://host:port`` of the first socket (the port the OS chose for port 0)."""
        host, port = self.config.host, self.servers[0].sockets[0].getsockname()[1]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}"


class _BackgroundServer(_Server):
    """Leaves signal handling to the surrounding program."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def serve(
    manager: AgentManager,
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_settings: ApiSettings | None = None,
    routers: Sequence[APIRouter] = (),
    ready: Callable[[str], None] | None = None,
    startup: Startup | None = None,
) -> None:
    """Serve the API for ``manager``'s agents until SIGINT/SIGTERM (``carrier serve``);
    ``ready(url)`` is called once it listens; ``startup``: see :mod:`carrier.api.readiness`."""
    check_bind(host, settings)
    app = create_app(
        manager,
        settings,
        host=host,
        api_settings=api_settings,
        routers=routers,
        startup=startup,
    )
    await _serve(_Server(_config(app, host, port, settings.log_level), ready), host, port)


async def _serve(server: uvicorn.Server, host: str, port: int) -> None:
    """``server.serve()``, but a failure to listen raises :class:`ConfigError`: uvicorn logs the
    OS error and calls ``sys.exit``, which inside a task would escape the event loop as a
    traceback."""
    try:
        await server.serve()
    except SystemExit:
        if server.started:
            raise
        why = port_problem(host, port) or f"cannot listen on {host}:{port} (see the error above)"
        raise ConfigError(why) from None


@contextlib.asynccontextmanager
async def running_app(
    app: FastAPI, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
) -> AsyncIterator[str]:
    """Run ``app`` on uvicorn in a background task; yields ``http://host:port`` (``port=0``
    picks a free port) and stops the server on exit."""
    server = _BackgroundServer(_config(app, host, port, log_level))
    task = asyncio.create_task(_serve(server, host, port))
    while not server.started:
        if task.done():
            task.result()  # raises what stopped it (ConfigError: the port is taken)
            raise RuntimeError(f"the API server did not start on {host}:{port}")
        await asyncio.sleep(0.01)
    try:
        yield server.url
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def api_server(
    manager: AgentManager,
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_settings: ApiSettings | None = None,
    routers: Sequence[APIRouter] = (),
    startup: Startup | None = None,
) -> AsyncIterator[str]:
    """The API in the background of other work (``carrier run``); yields its base URL.
    ``startup``: see :mod:`carrier.api.readiness`."""
    check_bind(host, settings)
    app = create_app(
        manager,
        settings,
        host=host,
        api_settings=api_settings,
        routers=routers,
        startup=startup,
    )
    async with running_app(app, host=host, port=port, log_level=settings.log_level) as url:
        yield url
