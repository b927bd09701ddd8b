"""``carrier health``: the probe a container healthcheck or a process supervisor runs.

Two questions, one line of answer each, exit 0 for yes and 1 for no (Docker reads any other code
as "unhealthy" too, and reserves 2):

- **Does the API here answer?** ``GET /health/ready`` (or ``/health/live``) on
  ``http://127.0.0.1:$PORT`` (8000 when ``PORT`` is unset), or on ``--url``: ready when it
  answers 200. Only the standard library is imported (the probe runs every few seconds in every
  container), the connection is direct (no proxy from the environment) and redirects are not
  followed: a probe checks this server, not another.
- **Does a worker run on this host?** (``--worker``) A worker holds the lease
  ``worker:<worker id>`` in the fleet store and renews it every few seconds; the probe passes when
  that lease is unexpired. The worker id is ``CARRIER_WORKER_ID`` when set, else
  ``<hostname>-<pid>``, so without the variable any worker of this host counts.
"""

from __future__ import annotations

import base64
import json
import os
import socket
from typing import TYPE_CHECKING, Annotated
from urllib.parse import unquote, urlsplit, urlunsplit

import typer

if TYPE_CHECKING:
    from datetime import datetime

    from carrier.fleet.model import Lease
    from carrier.settings import Settings

__all__ = ["health", "probe_url", "worker_leases"]

DEFAULT_PORT = "8000"
LIVE, READY = "/health/live", "/health/ready"


def health(
    url: Annotated[
        str | None,
        typer.Option(
            help="The API to probe, e.g. http://127.0.0.1:8000 (then /health/ready is asked, or "
            "/health/live with --live) or a full URL. Default: 127.0.0.1 on $PORT, else 8000."
        ),
    ] = None,
    live: Annotated[
        bool | None,
        typer.Option(
            "--live/--ready",
            help="Ask /health/live (the process answers) or /health/ready (it can serve; the "
            "default).",
        ),
    ] = None,
    worker: Annotated[
        bool,
        typer.Option(
            "--worker",
            help="Check instead that a worker on this host renews its lease in the store "
            "(CARRIER_WORKER_ID names one worker).",
        ),
    ] = False,
    timeout: Annotated[
        float, typer.Option(min=0.1, max=120.0, help="Seconds to wait for the answer.")
    ] = 5.0,
) -> None:
    """Check that Carrier runs here, for healthchecks: exit 0 when healthy, 1 when not.

    Prints one line saying what was asked and what answered.
    """
    if worker:
        if url is not None or live is not None:
            raise typer.BadParameter("--worker asks the store, not the API: leave out --url/--live")
        healthy, line = check_worker(timeout=timeout)
    else:
        target = _target(url, live)
        healthy, line = probe_url(target, timeout=timeout)
    typer.echo(line)
    raise typer.Exit(0 if healthy else 1)


# -- the API -----------------------------------------------------------------------------------
def _target(url: str | None, live: bool | None) -> str:
    """The URL to ask: ``--url`` as given when it names a path, else its root (or
    ``127.0.0.1:$PORT``) with the liveness or readiness path."""
    path = LIVE if live else READY
    if url is None:
        port = os.environ.get("PORT", "").strip() or DEFAULT_PORT
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise typer.BadParameter(
                f"{port!r} is not a port number: fix PORT or pass --url", param_hint="PORT"
            )
        return f"http://127.0.0.1:{port}{path}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise typer.BadParameter(
            "give an http:// or https:// URL with a host, e.g. http://127.0.0.1:8000",
            param_hint="--url",
        )
    if parts.path in ("", "/"):
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
    if live is not None:
        raise typer.BadParameter(
            f"{_shown(url)} names a path already: leave out the path or --live/--ready",
            param_hint="--url",
        )
    return url


def _shown(url: str) -> str:
    """``scheme://host:port/path``: no user, password or query, which could hold a credential."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def probe_url(url: str, *, timeout: float) -> tuple[bool, str]:
    """``GET url``: (True, line) when it answers 200, else (False, line saying what happened)."""
    import http.client
    import urllib.error
    import urllib.request

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None  # the 3xx itself is the answer

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    parts = urlsplit(url)
    where = parts.netloc.rpartition("@")[2]
    headers = {"Accept": "application/json", "User-Agent": "carrier-health"}
    if parts.username is not None:  # a proxy's basic auth: sent as a header, never shown
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    plain = urlunsplit((parts.scheme, where, parts.path, parts.query, ""))
    request = urllib.request.Request(plain, headers=headers)
    shown = _shown(url)
    try:
        with opener.open(request, timeout=timeout) as response:
            code, body = response.status, response.read(65536)
    except urllib.error.HTTPError as exc:  # an answer all the same: 503, 404, a redirect
        code, body = exc.code, exc.read(65536)
    except urllib.error.URLError as exc:
        return False, _unreachable(shown, where, exc.reason, timeout)
    except (TimeoutError, http.client.HTTPException, OSError) as exc:
        return False, _unreachable(shown, where, exc, timeout)
    status = _status_field(body)
    said = f" (status: {status})" if status else ""
    if code == 200:
        return True, f"ok: {shown} answered 200{said}"
    return False, f"unhealthy: {shown} answered {code}{said}"


def _unreachable(shown: str, where: str, reason: object, timeout: float) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return (
            f"down: nothing listens at {where} (connection refused): is Carrier running, and "
            "on this port (PORT, --url)?"
        )
    if isinstance(reason, TimeoutError):
        return f"down: {shown} did not answer within {timeout:g} s"
    if isinstance(reason, socket.gaierror):
        return f"down: cannot resolve {urlsplit(shown).hostname}: {reason.strerror or reason}"
    detail = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
    return f"down: {shown} could not be asked: {detail}"


def _status_field(body: bytes) -> str | None:
    """The ``status`` the health answer names (``ok``, ``degraded``), if it is JSON with one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    status = data.get("status") if isinstance(data, dict) else None
    return status if isinstance(status, str) and len(status) <= 40 else None


# -- a worker ----------------------------------------------------------------------------------
def check_worker(*, timeout: float) -> tuple[bool, str]:
    """Whether an unexpired ``worker:`` lease of this host (or of ``CARRIER_WORKER_ID``) is in
    the fleet store the settings name."""
    import asyncio

    from pydantic import ValidationError

    from carrier.datadir import private_umask
    from carrier.errors import CarrierError
    from carrier.settings import explain_settings, load_settings

    try:
        settings = load_settings()
    except ValidationError as exc:
        return False, f"unhealthy: {explain_settings(exc)}"
    if settings.mongodb_uri is None and not settings.store_path.exists():
        # Nothing to ask: no Carrier has used this data dir (and a probe creates nothing).
        return False, f"no worker: {settings.store_path} does not exist (no worker has started)"
    private_umask()  # should the store's files be created now, they are the user's only
    worker_id = os.environ.get("CARRIER_WORKER_ID", "").strip() or None
    try:
        now, leases = asyncio.run(
            asyncio.wait_for(worker_leases(settings, worker_id), timeout=timeout)
        )
    except TimeoutError:
        return False, f"unhealthy: the store did not answer within {timeout:g} s"
    except CarrierError as exc:  # store errors name the store, never its password
        return False, f"unhealthy: {exc}"
    return _judge(leases, now, worker_id, where=_store_name(settings))


async def worker_leases(settings: Settings, worker_id: str | None) -> tuple[datetime, list[Lease]]:
    """The store's time and the ``worker:`` leases that stand for this host's workers (or for
    ``worker_id``), expired ones included."""
    from carrier.fleet.base import FleetStore

    async with FleetStore.from_settings(settings) as fleet:
        if worker_id is not None:
            name = f"worker:{worker_id}"
            found = [lease for lease in await fleet.leases(name) if lease.name == name]
        else:
            # <hostname>-<pid> exactly: host "web" must not pass on the lease of host "web-2".
            prefix = f"worker:{socket.gethostname()}-"
            found = [
                lease for lease in await fleet.leases(prefix) if lease.name[len(prefix) :].isdigit()
            ]
        return fleet.now(), found


def _judge(
    leases: list[Lease], now: datetime, worker_id: str | None, *, where: str
) -> tuple[bool, str]:
    alive = [lease for lease in leases if lease.expires_at > now]
    if alive:
        newest = max(alive, key=lambda lease: lease.renewed_at)
        ago = max(0.0, (now - newest.renewed_at).total_seconds())
        others = f" (and {len(alive) - 1} more)" if len(alive) > 1 else ""
        return True, f"ok: {newest.name} renewed {ago:.0f} s ago{others}"
    wanted = f"worker:{worker_id}" if worker_id else f"worker:{socket.gethostname()}-<pid>"
    if leases:
        last = max(leases, key=lambda lease: lease.expires_at)
        ago = (now - last.expires_at).total_seconds()
        return False, (
            f"unhealthy: {last.name} expired {ago:.0f} s ago: the worker stopped or hangs "
            "(see its log)"
        )
    return False, (
        f"no worker: no lease {wanted} in {where}: no worker (carrier run) runs here, or it "
        "has not started yet"
    )


def _store_name(settings: Settings) -> str:
    if settings.mongodb_uri is None:
        return f"SQLite {settings.store_path}"
    return "the MongoDB store (CARRIER_MONGODB_URI)"
