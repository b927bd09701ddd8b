"""``carrier run`` (the main job) and ``carrier serve`` (the API for stored agents).

``run`` loads personas, starts each one's clients where credentials exist (saying which were
skipped and why), runs the job worker and scheduler, and serves the API and console on
127.0.0.1:8000 unless ``--no-api``, until SIGINT/SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from carrier.secret_key import ensure_secret_key
from carrier.settings import Settings

__all__ = ["run_main", "serve_main"]

log = logging.getLogger("carrier.run")


def _say(message: str) -> None:
    print(message, flush=True)


async def run_main(
    paths: Sequence[Path],
    *,
    settings: Settings,
    serve_api: bool,
    host: str = "127.0.0.1",
    port: int = 8000,
) -> int:
    """Returns the process exit code."""
    from carrier.agents import AgentManager
    from carrier.assemble import default_embedder, open_store
    from carrier.jobs.service import JobService

    if serve_api:
        from carrier.api import check_bind

        check_bind(host, settings)  # refuse a public bind without a token before loading anything
    ensure_secret_key(settings.data_dir, os.environ)
    store = await open_store(settings)
    manager = AgentManager(
        store=store, embedder=default_embedder(), settings=settings, environ=os.environ
    )
    jobs = JobService.from_settings(settings)
    try:
        # The job store is open before any client starts (clients enqueue work), and adapters
        # register their job handlers (Instagram posting) before the worker runs.
        await jobs.store.open()
        manager.services["jobs"] = jobs.store
        register_job_handlers(jobs, manager)
        reports = await manager.load_files(paths)
        started = 0
        clients = 0
        for report in reports:
            if report.error or report.status is None:
                _say(f"skipped {report.path}: {report.error}")
                continue
            status = report.status
            started += 1
            clients += len(status.clients)
            _say(f"{status.record.name} ({status.record.id}): {status.model}")
            knowledge = manager.runtime(status.record.id).knowledge_report
            if knowledge is not None and (knowledge.error or knowledge.changed or knowledge.failed):
                _say(f"  knowledge: {knowledge.summary()}")
            if status.interrupted:
                _say(
                    f"  {status.interrupted} message(s) interrupted by the last stop were marked failed"
                )
            for name in status.clients:
                _say(f"  started {name}")
            for name, why in status.skipped.items():
                _say(f"  skipped {name}: {why}")
        if not started:
            _say(
                "no persona could be loaded; fix the files above (carrier validate PATH shows every problem)"
            )
            return 1
        await jobs.start()
        if serve_api:
            from carrier.api import api_server

            async with api_server(manager, settings, host=host, port=port) as url:
                _say(f"agent API and console on {url} (Ctrl-C to stop)")
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
    from carrier.jobs.service import JobService

    check_bind(host, settings)
    ensure_secret_key(settings.data_dir, os.environ)
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
    try:
        await serve(manager, settings, host=host, port=port)  # uvicorn handles SIGINT/SIGTERM
    finally:
        await manager.close()
        await jobs.store.close()
        await store.close()
    return 0


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
