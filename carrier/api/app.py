"""The FastAPI application: routes, auth, limits, CORS and error handling in one place.

``create_app(manager, settings, host=...)`` builds it for a server listening on ``host`` (which
decides the ``Host`` names it answers to); the manager (and its store) belong to the caller,
who starts and closes them (``carrier serve``, ``carrier run``, tests). Extra routers (the
``/tools`` routes, the web console) are passed as ``routers=`` or appended to ``ROUTERS``.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from carrier.agents import AgentManager
from carrier.api.auditing import AuditMiddleware
from carrier.api.auth import Authenticator, TokenStore
from carrier.api.bodies import BodyLimitMiddleware
from carrier.api.console import router as console_router
from carrier.api.errors import install_error_handlers
from carrier.api.front_door import FrontDoor, HostPolicy
from carrier.api.metrics import Metrics
from carrier.api.ratelimit import RateLimiter
from carrier.api.readiness import Startup
from carrier.api.routes import (
    agents,
    audit,
    checks,
    clients,
    health,
    media,
    memories,
    messages,
    revisions,
    rooms,
    series,
    tokens,
    tools,
    webhooks,
)
from carrier.api.routes import conversations as conversation_routes
from carrier.api.routes import jobs as jobs_routes
from carrier.api.routes import knowledge as knowledge_routes
from carrier.api.routes import logs as logs_routes
from carrier.api.routes import people as people_routes
from carrier.api.routes import platforms as platform_routes
from carrier.api.routes import tool_test as tool_test_routes
from carrier.api.settings import ApiSettings, load_api_settings
from carrier.api.state import ApiState
from carrier.audit.base import audit_from
from carrier.errors import ConfigError
from carrier.local_token import admin_token
from carrier.settings import Settings

__all__ = ["ROUTERS", "create_app"]

ROUTERS: list[APIRouter] = [
    agents.router,
    checks.router,
    revisions.router,
    messages.router,
    media.router,
    memories.router,
    rooms.router,
    conversation_routes.router,
    people_routes.router,
    clients.router,
    tokens.router,
    tool_test_routes.router,
    tools.router,
    health.router,
    console_router,
    jobs_routes.router,
    platform_routes.router,
    audit.router,
    series.router,
    webhooks.router,
    knowledge_routes.router,
    logs_routes.router,
]
"""The built-in route groups, in the order they are mounted."""

DESCRIPTION = """\
Create, configure, start and stop Carrier agents, talk to them and search their memories.

Authenticate with `Authorization: Bearer <token>`: the admin token may do everything; a per-agent
token (`POST /tokens`) may message one agent, upload its media and read it and its memories. The
admin token is `CARRIER_ADMIN_TOKEN`; without it the server listens on loopback only and its
admin token is minted into `admin.token` in the data dir (`carrier run` prints a console link
carrying it). Requests naming another `Host` than the server's (see `CARRIER_PUBLIC_HOSTS`) get
421; state-changing requests from another web origin (see `CARRIER_CORS_ORIGINS`) get 403.
"""


def create_app(
    manager: AgentManager,
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    api_settings: ApiSettings | None = None,
    routers: Sequence[APIRouter] = (),
    metrics: Metrics | None = None,
    startup: Startup | None = None,
) -> FastAPI:
    """The API for ``manager``'s agents, served on ``host`` (the address the server listens
    on: a loopback one answers to the loopback names and ``CARRIER_PUBLIC_HOSTS`` only).
    ``routers`` are mounted after the built-in ones. Without ``CARRIER_ADMIN_TOKEN`` the local
    admin token is minted into the data dir here if it is not there yet. ``startup``: the
    host's start-up, when it is not over before the API listens (``/health/ready``)."""
    api_settings = api_settings or load_api_settings(manager.environ)
    try:
        hosts = HostPolicy.for_bind(host, settings.public_hosts)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    metrics = metrics or Metrics()
    manager.add_plugin(metrics.plugin())
    tokens = TokenStore(store=manager.store, ttl=api_settings.token_cache_seconds)
    app = FastAPI(
        title="Carrier agent API",
        version="0.1.0",
        description=DESCRIPTION,
    )
    app.state.api = ApiState(
        manager=manager,
        settings=settings,
        api_settings=api_settings,
        tokens=tokens,
        metrics=metrics,
        startup=startup or Startup(),
    )
    app.state.metrics = metrics
    app.state.auth = Authenticator(
        admin_token=admin_token(settings).value,
        tokens=tokens,
        limiter=RateLimiter(rate=api_settings.rate_per_minute / 60, burst=api_settings.rate_burst),
    )
    install_error_handlers(app)
    # Middleware runs outermost-last-added: the front door (Host, then Origin) refuses before
    # anything else runs; CORS answers preflights before the body limit reads anything; the
    # body limit wraps every route.
    app.add_middleware(
        BodyLimitMiddleware,
        max_json=api_settings.max_json_bytes,
        max_upload=api_settings.max_upload_bytes,
    )
    if api_settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=api_settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Accept"],
            max_age=600,
        )
    app.add_middleware(FrontDoor, hosts=hosts, origins=api_settings.cors_origins)
    # Added last, so outermost: every state-changing call is audited, refused ones included,
    # whichever layer refuses it.
    app.add_middleware(AuditMiddleware, audit=lambda: audit_from(manager.services))
    for router in [*ROUTERS, *routers]:
        app.include_router(router)
    return app
