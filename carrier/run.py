"""``carrier run``: load personas, start their clients, keep them running until SIGTERM/Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from carrier.settings import Settings

__all__ = ["run_main"]

log = logging.getLogger("carrier.run")


def _say(message: str) -> None:
    print(message, flush=True)


def _client_config(character: Any, name: str) -> dict[str, Any]:
    config = getattr(character, "client_config", None) or {}
    value = config.get(name) if isinstance(config, dict) else None
    return dict(value) if isinstance(value, dict) else {}


async def run_main(paths: Sequence[Path], *, settings: Settings, serve_api: bool) -> int:
    """Returns the process exit code."""
    from carrier.assemble import build_runtime, default_embedder, open_store
    from carrier.character import load_character
    from carrier.clients import Client, ClientUnavailable, discover_clients
    from carrier.errors import CharacterError

    characters = []
    for path in paths:
        try:
            characters.append(load_character(path))
        except CharacterError as exc:
            _say(f"skipped {path}: {exc}")
    if not characters:
        _say(
            "no persona could be loaded; fix the files above (carrier validate PATH shows every problem)"
        )
        return 1

    store = await open_store(settings)
    runtimes = []
    clients: list[Client] = []
    try:
        embedder = default_embedder()
        factories = discover_clients()
        for character in characters:
            runtime, choice = build_runtime(
                character, settings=settings, store=store, embedder=embedder, environ=os.environ
            )
            interrupted = await runtime.start()
            runtimes.append(runtime)
            _say(f"{character.name} ({runtime.agent_id}): {choice.description}")
            if interrupted:
                _say(f"  {interrupted} message(s) interrupted by the last stop were marked failed")
            wanted = [str(c).lower() for c in (getattr(character, "clients", None) or [])]
            if not wanted:
                _say("  no clients listed in the character (add e.g. clients: [discord])")
            for name in wanted:
                factory = factories.get(name)
                if factory is None:
                    _say(f"  skipped {name}: no '{name}' client is installed in this version")
                    continue
                try:
                    client = factory(runtime, _client_config(character, name), os.environ)
                    await client.start()
                except ClientUnavailable as exc:
                    _say(f"  skipped {name}: {exc}")
                    continue
                clients.append(client)
                _say(f"  started {name}")
        if serve_api:
            _say(
                "the agent API and web console are not part of this version yet; use --no-api to silence this"
            )
        if not clients:
            _say(
                "nothing left to run: no client started. Set the platform credentials named above, "
                "or talk to a persona with: carrier chat " + str(paths[0])
            )
            return 0
        await _wait_for_stop()
        _say("stopping")
        return 0
    finally:
        for client in clients:
            try:
                await client.stop()
            except Exception:
                log.exception("client %s did not stop cleanly", client.name)
        for runtime in runtimes:
            await runtime.stop()
        await store.close()


async def _wait_for_stop() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(
            NotImplementedError, RuntimeError
        ):  # not on Windows / not main thread
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
