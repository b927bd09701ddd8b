"""``carrier run`` (the main job) and ``carrier serve`` (the API for stored agents): the command
lines; the work itself is in :mod:`carrier.run`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from carrier.cli._common import err, quiet_ml, setup_logging

__all__ = ["run", "serve"]

if TYPE_CHECKING:
    from carrier.settings import Settings


def _settings() -> Settings:
    """The settings, the data dir made private; an invalid setting (a short
    ``CARRIER_ADMIN_TOKEN``, say) exits 2 with what is wrong and how to fix it, no traceback."""
    from pydantic import ValidationError

    from carrier.datadir import private_data_dir
    from carrier.settings import explain_settings, load_settings

    try:
        return private_data_dir(load_settings())
    except ValidationError as exc:
        err(f"carrier: {explain_settings(exc)}")
        raise typer.Exit(2) from None


def run(
    characters: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[CHARACTER]...", help="Persona files (default: every file in characters/)."
        ),
    ] = None,
    no_api: Annotated[
        bool, typer.Option("--no-api", help="Do not serve the API and console.")
    ] = False,
    host: Annotated[str, typer.Option(help="Where the API listens.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The API's port.")] = 8000,
    prefer: Annotated[
        str | None,
        typer.Option(
            help="When a file and the store both changed since the file's last import: 'file' "
            "imports the file as a new revision, 'store' keeps the stored character.",
            metavar="file|store",
        ),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(
            envvar="CARRIER_WORKER_GROUP",
            help="This worker's group: it runs the clients of agents placed on it (carrier "
            "agents start ID --placement NAME) and of agents placed nowhere in particular.",
        ),
    ] = None,
) -> None:
    """Run personas: their clients, the job scheduler, the API and console.

    Character files are imported into the store (a changed file becomes a new revision; one
    that would undo a change made through the API is refused unless --prefer says), then every
    agent that should run runs, with its clients where their credentials exist, however it was
    created. With --no-api this is the worker beside `carrier serve --no-clients`. Stops on
    Ctrl-C or SIGTERM.
    """
    quiet_ml()
    from carrier.character import CHARACTER_SUFFIXES
    from carrier.errors import ConfigError

    if prefer not in (None, "file", "store"):
        err(f"carrier: --prefer takes 'file' or 'store', not {prefer!r}")
        raise typer.Exit(2)
    settings = _settings()
    setup_logging(settings.log_level)
    paths = list(characters or [])
    if not paths:
        folder = settings.characters_dir
        paths = (
            sorted(p for p in folder.glob("*") if p.suffix.lower() in CHARACTER_SUFFIXES)
            if folder.is_dir()
            else []
        )
        if not paths and not no_api and not _stored_agents(settings):
            err(f"no character files in {folder}/; name one: carrier run characters/NAME.yaml")
            raise typer.Exit(1)
    from carrier.cli._progress import working
    from carrier.run import run_main

    try:
        code = asyncio.run(
            run_main(
                paths,
                settings=settings,
                serve_api=not no_api,
                host=host,
                port=port,
                progress=working,
                prefer=prefer,  # type: ignore[arg-type]  # checked above
                group=group,
            )
        )
    except ConfigError as exc:
        err(f"carrier: {exc}")
        raise typer.Exit(2) from None
    raise typer.Exit(code)


def _stored_agents(settings: Settings) -> bool:
    """Whether the store holds an agent (a run with no files then runs the stored ones). The
    embedded store only: with MongoDB, the run goes on and says what it finds."""
    import sqlite3
    from contextlib import closing

    if settings.mongodb_uri is not None:
        return True
    path = settings.store_path
    if not path.exists():
        return False
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return db.execute("SELECT 1 FROM agents LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return False


def serve(
    host: Annotated[
        str, typer.Option(help="Where to listen (non-loopback needs CARRIER_ADMIN_TOKEN).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    clients: Annotated[
        bool,
        typer.Option(
            "--clients/--no-clients",
            help="Start agents' platform clients (Discord, Instagram) here; --no-clients when a "
            "worker process (carrier run --no-api) runs them, so no bot connects twice.",
        ),
    ] = True,
) -> None:
    """Serve the agent API and console for the agents stored in the store."""
    quiet_ml()
    from carrier.errors import ConfigError
    from carrier.run import serve_main

    settings = _settings()
    setup_logging(settings.log_level)
    try:
        code = asyncio.run(serve_main(settings, host=host, port=port, start_clients=clients))
    except ConfigError as exc:
        err(f"carrier: {exc}")
        raise typer.Exit(2) from None
    raise typer.Exit(code)
