"""Running the API on uvicorn, programmatically.

``serve()`` is ``carrier serve``: it runs until SIGINT/SIGTERM. ``api_server()`` runs it in the
background of other work (``carrier run``, tests, benchmarks) and yields its base URL. Both
refuse to listen beyond loopback when no ``CARRIER_ADMIN_TOKEN`` is set, and a port uvicorn
cannot bind (taken since the callers' own check) ends in a :class:`ConfigError` that says which
``--port`` to try, not in uvicorn's ``SystemExit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator, Generator, Sequence

import uvicorn
from fastapi import APIRouter, FastAPI

from carrier.agents import AgentManager
from carrier.api.app import create_app
from carrier.api.settings import ApiSettings
from carrier.errors import ConfigError
from carrier.ports import port_problem
from carrier.settings import Settings

__all__ = ["api_server", "check_bind", "running_app", "serve"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, settings: Settings) -> None:
    """Raise :class:`ConfigError` for a non-loopback ``host`` without an admin token: without one,
    loopback callers act as admin, which is only safe when nobody else can connect."""
    if settings.admin_token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without an admin token: set CARRIER_ADMIN_TOKEN "
            "(a long random string) or listen on 127.0.0.1"
        )


def _config(app: FastAPI, host: str, port: int, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="off",
        log_config=None,  # keep the process's own logging set-up
        log_level=log_level.lower(),
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=5,
    )


class _BackgroundServer(uvicorn.Server):
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
) -> None:
    """Serve the API for ``manager``'s agents until SIGINT/SIGTERM (``carrier serve``)."""
    check_bind(host, settings)
    app = create_app(manager, settings, api_settings=api_settings, routers=routers)
    await _serve(uvicorn.Server(_config(app, host, port, settings.log_level)), host, port)


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
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
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
) -> AsyncIterator[str]:
    """The API in the background of other work (``carrier run``); yields its base URL."""
    check_bind(host, settings)
    app = create_app(manager, settings, api_settings=api_settings, routers=routers)
    async with running_app(app, host=host, port=port, log_level=settings.log_level) as url:
        yield url
