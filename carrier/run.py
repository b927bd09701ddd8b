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
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from carrier.agents.follow import Follower
from carrier.errors import CarrierError, ConfigError
from carrier.fleet.presence import Presence, process_id
from carrier.local_token import admin_token, console_invitation
from carrier.logtail import tail_agent_logs
from carrier.ports import port_problem
from carrier.secret_key import ensure_secret_key
from carrier.settings import Settings

if TYPE_CHECKING:
    from carrier.agents import AgentManager, AgentStatus
    from carrier.agents.imports import Prefer
    from carrier.fleet.base import FleetStore
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
    prefer: Prefer | None = None,
    group: str | None = None,
) -> int:
    """Returns the process exit code. ``progress(message)`` wraps each slow step.

    The character files are imported into the store (:mod:`carrier.agents.imports`), then every
    agent whose desired state is running runs, however it was created, and the process follows
    the change log (:class:`~carrier.agents.follow.Follower`) until stopped. Without the API this
    is the worker of a web + worker deployment."""
    from carrier.agents import AgentManager
    from carrier.assemble import default_embedder, offline_summary, open_store
    from carrier.audit.host import HostAudit, open_host_audit
    from carrier.jobs.service import JobService
    from carrier.retention.job import schedule_retention
    from carrier.series.host import HostSeries, open_host_series
    from carrier.tools.approvals import register_tool_jobs

    if serve_api:
        from carrier.api import check_bind

        # Before anything loads: a public bind without a token, or a port that is taken.
        check_bind(host, settings)
        check_port(host, port)
    ensure_secret_key(settings.data_dir, os.environ)
    token = admin_token(settings) if serve_api else None  # minted before anything is served
    store = await open_store(settings)
    fleet = await _open_fleet(settings, store)
    embedder = default_embedder(settings)
    manager = AgentManager(
        store=store,
        embedder=embedder,
        settings=settings,
        environ=os.environ,
        fleet=fleet,
        serves_api=serve_api,  # a worker leaves the API's turns to the web process
        group=group,
    )
    untail = tail_agent_logs(manager)  # the console's live log tail
    jobs = JobService.from_settings(settings)
    audit: HostAudit | None = None
    series: HostSeries | None = None
    try:
        audit = await open_host_audit(settings, manager.services)  # before any agent starts
        series = await open_host_series(settings, manager)  # turns counted; budgets enforced
        # The job store is open before any client starts (clients enqueue work), and adapters
        # register their job handlers (Instagram posting) before the worker runs.
        await jobs.store.open()
        manager.services["jobs"] = jobs.store
        register_job_handlers(jobs, manager)
        register_tool_jobs(jobs, manager)  # tool calls approved by a human run here
        await schedule_retention(jobs, manager, audit_days=settings.audit_retention_days)
        imported = await _import_files(manager, paths, prefer)
        follower = Follower(manager, on_run=lambda agent_id: _report_run(manager, agent_id))
        seen = await follower.mark()  # before the agents start: nothing said meanwhile is missed
        statuses = await _run_agents(manager, embedder, progress)
        if not statuses and paths and not imported and not await manager.list():
            _say(
                "no persona could be loaded; fix the files above (carrier validate PATH shows every problem)"
            )
            return 1
        await _say_stopped(manager, {s.record.id for s in statuses})
        summary = offline_summary([(s.record.name, s.model_note) for s in statuses if s.offline])
        if summary:
            _say(summary)
        await jobs.start()
        if series is not None and series.recorder is not None:  # job outcomes for the charts
            series.recorder.watch_jobs(lambda: jobs.worker.stats)
        async with _following(follower, seen), _presence(fleet, settings):
            if token is not None:
                from carrier.api import api_server

                async with api_server(manager, settings, host=host, port=port) as url:
                    stop = _stop_signals()  # before the line that says it runs
                    _say(console_invitation(url, token, terminal=_terminal()))
                    await stop.wait()
            else:
                if not any(s.clients for s in statuses):
                    _say(
                        "no platform client connected here: set the credentials named above, or "
                        "talk to a persona with: carrier chat PATH. Agents started or changed "
                        "through the API are applied here as they come."
                    )
                stop = _stop_signals()
                _say("running (Ctrl-C to stop)")
                await stop.wait()
        _say("stopping")
        return 0
    finally:
        await jobs.stop(grace_s=30)
        await manager.close()
        if series is not None:  # after the agents' last turns
            await series.aclose()
        if audit is not None:  # after the agents' stops, which it records
            await audit.aclose()
        await fleet.close()
        await store.close()
        untail()


async def serve_main(
    settings: Settings, *, host: str, port: int, start_clients: bool = True
) -> int:
    """Serve the API and console for the agents stored in the Store (``carrier serve``), running
    every agent whose desired state is running and following the change log. With
    ``start_clients`` False (the web process), agents run here answer the API only and never
    open a platform connection: the worker processes (``carrier run --no-api``) do."""
    from carrier.agents import AgentManager
    from carrier.api import check_bind, serve
    from carrier.assemble import default_embedder, open_store
    from carrier.audit.host import open_host_audit
    from carrier.jobs.service import JobService
    from carrier.series.host import HostSeries, open_host_series

    check_bind(host, settings)
    check_port(host, port)  # before the store opens
    ensure_secret_key(settings.data_dir, os.environ)
    token = admin_token(settings)
    store = await open_store(settings)
    fleet = await _open_fleet(settings, store)
    # The web process enqueues and approves jobs; the worker process (carrier run) runs them.
    jobs = JobService.from_settings(settings)
    await jobs.store.open()
    manager = AgentManager(
        store=store,
        embedder=default_embedder(settings),
        settings=settings,
        environ=os.environ,
        services={"jobs": jobs.store},
        start_clients=start_clients,
        fleet=fleet,
    )
    untail = tail_agent_logs(manager)  # the console's live log tail
    audit = await open_host_audit(settings, manager.services)
    series: HostSeries | None = None
    try:
        series = await open_host_series(settings, manager)
        follower = Follower(manager)
        seen = await follower.mark()
        for agent_id in await manager.resume():
            try:
                await manager.run(agent_id)
            except CarrierError as exc:
                log.warning("agent %s did not start: %s", agent_id, exc)
        # With its clients, this process is one that runs them: it shows as a worker.
        present = _presence(fleet, settings) if start_clients else contextlib.nullcontext()
        async with _following(follower, seen), present:
            await serve(  # uvicorn handles SIGINT/SIGTERM
                manager,
                settings,
                host=host,
                port=port,
                ready=lambda url: _say(console_invitation(url, token, terminal=_terminal())),
            )
    finally:
        await manager.close()
        if series is not None:
            await series.aclose()
        await audit.aclose()
        await jobs.store.close()
        await fleet.close()
        await store.close()
        untail()
    return 0


async def _open_fleet(settings: Settings, store: Any) -> FleetStore:
    from carrier.fleet.base import FleetStore

    fleet = FleetStore.from_settings(settings)
    try:
        await fleet.open()
    except BaseException:
        await store.close()
        raise
    return fleet


@contextlib.asynccontextmanager
async def _following(follower: Follower, seen: int) -> AsyncIterator[None]:
    """Follow the change log while the block runs."""
    task = asyncio.create_task(follower.run(after=seen), name="carrier-follower")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _presence(fleet: FleetStore, settings: Settings) -> Presence:
    """This process's ``worker:`` lease, as long as its connection leases."""
    ttl = settings.connection_lease_seconds
    return Presence(fleet, process_id(), ttl_s=ttl, beat_s=ttl / 3)


async def _import_files(manager: AgentManager, paths: Sequence[Path], prefer: Prefer | None) -> int:
    """Import each file into the store, saying what a file changed or could not; returns how
    many imported (or matched the store)."""
    from carrier.agents.imports import ImportAction, import_file

    done = 0
    for path in paths:
        try:
            outcome = await import_file(manager, path, prefer=prefer)
        except CarrierError as exc:
            _say(f"skipped {path}: {exc}")
            continue
        done += 1
        if outcome.action == ImportAction.UPDATED:
            extra = f", {outcome.note}" if outcome.note else ""
            _say(f"imported {path} as revision {outcome.revision} of {outcome.agent_id}{extra}")
        elif outcome.note:
            _say(outcome.note)
    return done


async def _run_agents(
    manager: AgentManager, embedder: Embedder, progress: Progress
) -> list[AgentStatus]:
    """Run every agent that should run, reporting each once."""
    statuses = []
    for agent_id in await manager.resume():
        await _load_model(embedder, progress)  # once, when the first agent is about to start
        record = await manager.get(agent_id)
        try:
            with progress(f"starting {record.name}"):
                status = await manager.run(agent_id)
        except CarrierError as exc:
            _say(f"skipped {record.name} ({agent_id}): {exc}")
            continue
        _report(status)
        statuses.append(status)
    return statuses


def _report(status: AgentStatus) -> None:
    """An agent's start, once: its model's name and its clients (what happened inside its
    start, its knowledge synced or messages a crash interrupted, the core logs, once)."""
    _say(f"{status.record.name} ({status.record.id}): {status.model}")
    for name in status.clients:
        _say(f"  started {name}")
    for name, why in status.skipped.items():
        _say(f"  skipped {name}: {why}")


async def _report_run(manager: AgentManager, agent_id: str) -> None:
    _report(await manager.status(agent_id))


async def _say_stopped(manager: AgentManager, running: set[str]) -> None:
    """Name the agents that were stopped on purpose (through the API or the CLI), once."""
    for record in await manager.list():
        if record.id in running:
            continue
        status = await manager.status(record.id)
        if status.desired is None or status.should_run:  # never started; or runs elsewhere
            continue  # (placed on another group), or failed to start here (said above)
        by = f" by {status.desired.actor}" if status.desired.actor else ""
        _say(
            f"{record.name} ({record.id}): stopped{by}; start it with: carrier agents start "
            f"{record.id}"
        )


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


def _stop_signals() -> asyncio.Event:
    """An event SIGINT and SIGTERM set from now on (so a signal sent as soon as the process
    says it runs stops it cleanly)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(
            NotImplementedError, RuntimeError
        ):  # not on Windows / not main thread
            loop.add_signal_handler(sig, stop.set)
    return stop
