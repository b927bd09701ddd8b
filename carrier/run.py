"""``carrier run`` (the main job) and ``carrier serve`` (the API for stored agents).

``run`` loads personas, starts each one's clients where credentials exist (saying which were
skipped and why), runs the job worker and scheduler, and serves the API and console on
127.0.0.1:8000 unless ``--no-api``, until SIGINT/SIGTERM.

What a user sees, in order: a port that is taken stops both commands before anything loads;
``progress`` (a spinner, from the CLI) shows while the embedding model loads and while each
agent starts; each agent is reported once, as it starts (its model name and clients); the
offline explanation comes once, after the agents, naming those it applies to; then, once the API
listens, the console's address, carrying the local admin token in its fragment when stdout is a
terminal (:func:`carrier.local_token.console_invitation`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from carrier.errors import CarrierError, ConfigError
from carrier.local_token import admin_token, console_invitation
from carrier.ports import port_problem
from carrier.secret_key import ensure_secret_key
from carrier.settings import Settings

if TYPE_CHECKING:
    from carrier.agents import AgentManager, AgentStatus
    from carrier.memory.embedder import Embedder

Progress = Callable[[str], AbstractContextManager[None]]
"""Shows a message while a block runs: ``carrier.cli._progress.working`` (a spinner) in the CLI;
passed in, as the core does not import the CLI."""

__all__ = ["run_main", "serve_main"]

log = logging.getLogger("carrier.run")


def _say(message: str) -> None:
    print(message, flush=True)


def _silent(message: str) -> AbstractContextManager[None]:
    return nullcontext()


def _terminal() -> bool:
    """Whether stdout is a terminal (only then may a line carry the local admin token)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout
        return False


def check_port(host: str, port: int) -> None:
    """Raise :class:`ConfigError` (one line: what is wrong, which ``--port`` to try) when the API
    could not listen on ``host:port``; called before the store opens or the model loads."""
    problem = port_problem(host, port)
    if problem is not None:
        raise ConfigError(problem)


async def _load_model(embedder: Embedder, progress: Progress) -> None:
    from carrier.assemble import load_embedder

    if getattr(embedder, "loaded", True):  # loaded already, or nothing to load (a fake)
        return
    with progress("loading the embedding model"):
        await load_embedder(embedder)


async def run_main(
    paths: Sequence[Path],
    *,
    settings: Settings,
    serve_api: bool,
    host: str = "127.0.0.1",
    port: int = 8000,
    progress: Progress = _silent,
) -> int:
    """Returns the process exit code. ``progress(message)`` wraps each slow step."""
    from carrier.agents import AgentManager
    from carrier.assemble import default_embedder, offline_summary, open_store
    from carrier.audit.host import HostAudit, open_host_audit
    from carrier.jobs.service import JobService
    from carrier.retention.job import schedule_retention
    from carrier.tools.approvals import register_tool_jobs

    if serve_api:
        from carrier.api import check_bind

        # Before anything loads: a public bind without a token, or a port that is taken.
        check_bind(host, settings)
        check_port(host, port)
    ensure_secret_key(settings.data_dir, os.environ)
    token = admin_token(settings) if serve_api else None  # minted before anything is served
    store = await open_store(settings)
    embedder = default_embedder()
    manager = AgentManager(store=store, embedder=embedder, settings=settings, environ=os.environ)
    jobs = JobService.from_settings(settings)
    audit: HostAudit | None = None
    try:
        audit = await open_host_audit(settings, manager.services)  # before any agent starts
        # The job store is open before any client starts (clients enqueue work), and adapters
        # register their job handlers (Instagram posting) before the worker runs.
        await jobs.store.open()
        manager.services["jobs"] = jobs.store
        register_job_handlers(jobs, manager)
        register_tool_jobs(jobs, manager)  # tool calls approved by a human run here
        await schedule_retention(jobs, manager, audit_days=settings.audit_retention_days)
        started = 0
        clients = 0
        offline: list[tuple[str, str | None]] = []
        for path in paths:
            status = await _start_file(manager, path, embedder, progress)
            if status is not None:
                started += 1
                clients += len(status.clients)
                if status.offline:
                    offline.append((status.record.name, status.model_note))
        if not started:
            _say(
                "no persona could be loaded; fix the files above (carrier validate PATH shows every problem)"
            )
            return 1
        summary = offline_summary(offline)
        if summary:
            _say(summary)
        await jobs.start()
        if token is not None:
            from carrier.api import api_server

            async with api_server(manager, settings, host=host, port=port) as url:
                _say(console_invitation(url, token, terminal=_terminal()))
                await _wait_for_stop()
        elif clients:
            _say("running (Ctrl-C to stop)")
            await _wait_for_stop()
        else:
            _say(
                "nothing left to run: no client started and the API is off (--no-api). Set the "
                "platform credentials named above, or talk to a persona with: carrier chat "
                + str(paths[0])
            )
            return 0
        _say("stopping")
        return 0
    finally:
        await jobs.stop(grace_s=30)
        await manager.close()
        if audit is not None:  # after the agents' stops, which it records
            await audit.aclose()
        await store.close()


async def serve_main(
    settings: Settings, *, host: str, port: int, start_clients: bool = True
) -> int:
    """Serve the API and console for the agents stored in the Store (``carrier serve``). With
    ``start_clients`` False, agents started here do not connect to their platforms (a worker
    process beside it does)."""
    from carrier.agents import AgentManager
    from carrier.api import check_bind, serve
    from carrier.assemble import default_embedder, open_store
    from carrier.audit.host import open_host_audit
    from carrier.jobs.service import JobService

    check_bind(host, settings)
    check_port(host, port)  # before the store opens
    ensure_secret_key(settings.data_dir, os.environ)
    token = admin_token(settings)
    store = await open_store(settings)
    # The web process enqueues and approves jobs; the worker process (carrier run) runs them.
    jobs = JobService.from_settings(settings)
    await jobs.store.open()
    manager = AgentManager(
        store=store,
        embedder=default_embedder(),
        settings=settings,
        environ=os.environ,
        services={"jobs": jobs.store},
        start_clients=start_clients,
    )
    audit = await open_host_audit(settings, manager.services)
    try:
        await serve(  # uvicorn handles SIGINT/SIGTERM
            manager,
            settings,
            host=host,
            port=port,
            ready=lambda url: _say(console_invitation(url, token, terminal=_terminal())),
        )
    finally:
        await manager.close()
        await audit.aclose()
        await jobs.store.close()
        await store.close()
    return 0


async def _start_file(
    manager: AgentManager, path: Path, embedder: Embedder, progress: Progress
) -> AgentStatus | None:
    """Create or update the file's agent and start it, then report it, once: its model's name
    and its clients (what happened inside its start, its knowledge synced or messages a crash
    interrupted, the core logs, once). None, with the reason said, when the file does not load."""
    try:
        record = await manager.upsert_file(path)
    except CarrierError as exc:
        _say(f"skipped {path}: {exc}")
        return None
    await _load_model(embedder, progress)  # once, when the first agent is about to start
    try:
        with progress(f"starting {record.name}"):
            status = await manager.start(record.id)
    except CarrierError as exc:
        _say(f"skipped {path}: {exc}")
        return None
    _say(f"{status.record.name} ({status.record.id}): {status.model}")
    for name in status.clients:
        _say(f"  started {name}")
    for name, why in status.skipped.items():
        _say(f"  skipped {name}: {why}")
    return status


def register_job_handlers(jobs: Any, manager: Any) -> None:
    """Adapters' job handlers, from the ``carrier.jobs`` entry points: ``register(jobs, manager)``.
    One that fails to load is reported and skipped; the others still run."""
    for ep in entry_points(group="carrier.jobs"):
        try:
            ep.load()(jobs, manager)
        except Exception as exc:
            log.warning(
                "job handlers of %r not registered (%s: %s)", ep.name, type(exc).__name__, exc
            )


async def _wait_for_stop() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(
            NotImplementedError, RuntimeError
        ):  # not on Windows / not main thread
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
