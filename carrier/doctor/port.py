"""The API's address: free to listen on, and allowed (a public address needs an admin token)."""

from __future__ import annotations

from carrier.doctor.base import Result, fail, ok
from carrier.ports import port_problem
from carrier.settings import Settings

__all__ = ["check_port"]

NAME = "API port"


def check_port(host: str, port: int, settings: Settings) -> Result:
    """What ``carrier run`` and ``carrier serve`` check before they start, said ahead of time."""
    from carrier.api.server import check_bind
    from carrier.errors import ConfigError

    try:
        check_bind(host, settings)
    except ConfigError as exc:
        detail, _, fix = str(exc).partition(": ")
        return fail(NAME, detail, fix or "set CARRIER_ADMIN_TOKEN, or use --host 127.0.0.1")
    problem = port_problem(host, port)
    if problem is None:
        return ok(NAME, f"{host}:{port} is free")
    detail, _, fix = problem.partition("; ")
    return fail(NAME, detail, fix or "choose another address with --host and --port")
