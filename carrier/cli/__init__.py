"""The ``carrier`` command.

Every sub-command lives in a module of its own in this package and is imported only when it runs,
so ``carrier --help`` imports neither numpy, pydantic nor the store. :data:`COMMANDS` is the table
``carrier --help`` lists; adapters add command groups through the ``carrier.cli`` entry points.
"""

from __future__ import annotations

import typer

from carrier.cli._lazy import LazyCommand, LazyGroup

__all__ = ["COMMANDS", "app", "main"]

COMMANDS: dict[str, LazyCommand] = {
    "run": LazyCommand(
        "carrier.cli.run:run",
        "Run personas: their clients, the job scheduler, the API and console.",
    ),
    "serve": LazyCommand(
        "carrier.cli.run:serve",
        "Serve the agent API and console for the agents stored in the store.",
    ),
    "chat": LazyCommand(
        "carrier.cli.chat:chat",
        "Talk to a persona in the terminal (reads piped stdin too). Memory persists across runs.",
    ),
    "validate": LazyCommand(
        "carrier.cli.validate:validate",
        "Check character files and report every problem in every file (exit 1 if any).",
    ),
    "import-card": LazyCommand(
        "carrier.cli.validate:import_card", "Convert a Character Card into a Carrier persona file."
    ),
    "agents": LazyCommand(
        "carrier.cli.agents:agents_app",
        "Agents in the store: list, show, revisions, diff, revert, start, stop.",
    ),
    "memory": LazyCommand(
        "carrier.cli.memory:memory_app",
        "An agent's memories: list, search, export, import, prune, and forget a person.",
    ),
    "knowledge": LazyCommand(
        "carrier.cli.knowledge:knowledge_app",
        "Documents an agent knows: add files and folders, sync a character's list, list, remove.",
    ),
    "jobs": LazyCommand(
        "carrier.cli.jobs:jobs_app",
        "Durable jobs: list, show, cancel, retry, approve, reject; and schedules.",
    ),
    "audit": LazyCommand(
        "carrier.cli.audit:audit", "Read the audit log: who did what to which agent, newest first."
    ),
    "doctor": LazyCommand(
        "carrier.cli.doctor:doctor",
        "Check a deployment end to end and say how to fix what fails (exit 1 if anything fails).",
    ),
    "health": LazyCommand(
        "carrier.cli.health:health",
        "Check that Carrier runs here, for healthchecks: exit 0 when healthy, 1 when not.",
    ),
}


def _plugin_commands() -> dict[str, str]:
    """Command groups adapters register under the ``carrier.cli`` entry-point group."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="carrier.cli")}


class _CarrierGroup(LazyGroup):
    lazy = COMMANDS
    plugins = staticmethod(_plugin_commands)


app = typer.Typer(
    name="carrier",
    cls=_CarrierGroup,
    help="Run persona bots (ElizaOS-compatible characters) with memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: the rich help renderer alone costs more than the rest of `carrier --help`.
    rich_markup_mode=None,
)


@app.callback()
def _carrier() -> None:
    """Run persona bots (ElizaOS-compatible characters) with memory."""


def main() -> None:
    # Secrets and settings may live in .env: make them visible to everything (provider SDKs,
    # character secret references) without overriding the real environment.
    from dotenv import load_dotenv

    load_dotenv(".env", override=False)
    try:
        app()
    except Exception as exc:
        from carrier.cli._common import explain_failure

        message = explain_failure(exc)
        if message is None:
            raise
        typer.echo(f"carrier: {message}", err=True)
        raise SystemExit(2) from None
