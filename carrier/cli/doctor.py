"""``carrier doctor``: the command line; the checks are in :mod:`carrier.doctor`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from carrier.cli._common import quiet_ml, run_or_exit, setup_logging

__all__ = ["doctor"]


def doctor(
    characters: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[CHARACTER]...",
            help="Persona files (default: every file in characters/, and the stored agents).",
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Where the API will listen.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The API's port.")] = 8000,
    no_api: Annotated[
        bool, typer.Option("--no-api", help="The API will not be served: skip the port check.")
    ] = False,
    stored: Annotated[
        bool,
        typer.Option(
            "--stored/--no-stored",
            help="Also check agents kept in the store that no character file names (their "
            "problems are warnings).",
        ),
    ] = True,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds each network call may take.")
    ] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check a deployment end to end and say how to fix what fails (exit 1 if anything fails).

    Checks the data dir, the store (SQLite file or CARRIER_MONGODB_URI), the API port, and for
    each persona its model (one 1-token call) and its clients' credentials (Discord, Instagram).
    Secrets are never printed: the variables that hold them are named instead.
    """
    quiet_ml()
    setup_logging("ERROR")  # the report says what matters; library warnings would only repeat it
    from carrier.cli._progress import working
    from carrier.datadir import private_umask
    from carrier.doctor import run_doctor
    from carrier.doctor.render import render_json, render_text

    private_umask()  # what it creates is private; it reports the data dir's mode, never changes it
    with working("checking the deployment"):
        report = run_or_exit(
            run_doctor(
                environ=os.environ,
                paths=list(characters or []),
                host=host,
                port=port,
                serve_api=not no_api,
                stored=stored,
                wait=timeout,
            )
        )
    if as_json:
        typer.echo(render_json(report))
    else:
        typer.echo(render_text(report, terminal=sys.stdout.isatty()))
    raise typer.Exit(report.exit_code)
