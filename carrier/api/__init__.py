"""The agent API: FastAPI routes over an :class:`~carrier.agents.AgentManager`.

    app = create_app(manager, settings)           # an ASGI app
    await serve(manager, settings, host="127.0.0.1", port=8000)   # carrier serve
    async with api_server(manager, settings, port=8000) as url:   # beside other work
        ...

This package is the only part of the core that imports FastAPI.
"""

from carrier.api.app import ROUTERS, create_app
from carrier.api.server import api_server, check_bind, running_app, serve
from carrier.api.settings import ApiSettings, load_api_settings

__all__ = [
    "ROUTERS",
    "ApiSettings",
    "api_server",
    "check_bind",
    "create_app",
    "load_api_settings",
    "running_app",
    "serve",
]
