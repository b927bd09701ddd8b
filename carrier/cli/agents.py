"""``carrier agents ...``: the agents in the store, their revisions, and whether they should run.

Loaded by the main CLI only when ``carrier agents`` runs. The store is the one the settings name
(``CARRIER_MONGODB_URI``, else ``<CARRIER_DATA_DIR>/carrier.db``), shared with the running
``carrier run`` and ``carrier serve`` processes. An agent is named by its id or its name (or a
character file), as in ``carrier memory``.

This command never runs an agent: ``start`` and ``stop`` set the agent's desired state in the
store, and the running carriers apply it through the change log within seconds; ``revert``
stores a new revision through :class:`~carrier.agents.AgentManager` (no embedding model loads),
which running agents take from their next turn. What it changes is recorded as ``cli:<user>``.
Secret references are never printed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from carrier.cli._common import err, run_or_exit

if TYPE_CHECKING:
    from carrier.agents import AgentManager
    from carrier.agents.diff import CharacterDiff, FieldChange
    from carrier.fleet.base import FleetStore
    from carrier.fleet.model import Desired, DesiredState, Revision
    from carrier.types import AgentRecord

__all__ = ["agents_app"]

T = TypeVar("T")

agents_app = typer.Typer(
    name="agents",
    # As COMMANDS["agents"] in cli/__init__.py, which --help shows without importing this.
    help="Agents in the store: list, show, revisions, diff, revert, start, stop.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

AgentArg = Annotated[
    str,
    typer.Argument(metavar="AGENT", help="The agent: its id, its name or its character file."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]

APPLY_NOTE = "a running carrier applies it within 2 s"


def _with_manager(action: Callable[[AgentManager], Awaitable[T]]) -> T:
    """Open the store, an :class:`AgentManager` over it (its embedding model never loads: no
    agent runs here) and the fleet store, as ``cli:<user>``; run ``action``; close them."""
    import os

    from carrier.agents import AgentManager
    from carrier.assemble import open_store
    from carrier.audit.context import acting, cli_actor
    from carrier.cli._memory_common import make_embedder
    from carrier.datadir import private_data_dir
    from carrier.settings import load_settings

    async def main() -> T:
        settings = private_data_dir(load_settings())
        store = await open_store(settings)
        manager = AgentManager(
            store=store, embedder=make_embedder(), settings=settings, environ=os.environ
        )
        try:
            with acting(cli_actor()):
                return await action(manager)
        finally:
            await manager.close()
            await store.close()

    return run_or_exit(main())


async def _agent(manager: AgentManager, given: str) -> AgentRecord:
    """The stored agent ``given`` names (id, name, character file); a clear error otherwise."""
    from carrier.lookup import resolve_agent

    return await manager.get((await resolve_agent(manager.store, given)).id)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def _print_columns(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Plain aligned columns, never cut: ids stay whole to copy into other commands, and the
    output reads the same on a terminal, in a pipe or through grep."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    for line in (headers, *rows):
        typer.echo("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def _desired_text(desired: Desired | None) -> str:
    return desired.state.value if desired is not None else "stopped"


def _short(value: Any, width: int = 70) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


async def _live_workers(fleet: FleetStore) -> list[str]:
    """The names of the worker presence leases alive now (``carrier run`` holds one)."""
    from carrier.fleet.presence import WORKER_PREFIX

    now = fleet.now()
    return [lease.name for lease in await fleet.leases(WORKER_PREFIX) if lease.expires_at > now]


NO_WORKER = (
    "no worker (carrier run) is alive on this store: nothing runs {name} now; start one with "
    "`carrier run` (or `carrier run --no-api` beside `carrier serve --no-clients`)"
)


# -- list, show ----------------------------------------------------------------------------------
@agents_app.command("list")
def list_cmd(as_json: JsonOption = False) -> None:
    """List the agents: id, name, desired state, head revision, last update."""

    async def read(manager: AgentManager) -> tuple[list[dict[str, Any]], list[str]]:
        fleet = await manager.fleet()
        rows = []
        for record in await manager.list():
            desired = await fleet.desired(record.id)
            head = await fleet.head(record.id)
            rows.append(
                {
                    "id": record.id,
                    "name": record.name,
                    "desired": _desired_text(desired),
                    "desired_by": desired.actor if desired is not None else None,
                    "revision": head.number if head is not None else None,
                    "updated_at": record.updated_at.isoformat(),
                    "_updated": record.updated_at,
                }
            )
        return rows, await _live_workers(fleet)

    rows, workers = _with_manager(read)
    if as_json:
        for row in rows:
            typer.echo(json.dumps({k: v for k, v in row.items() if not k.startswith("_")}))
        return
    if not rows:
        typer.echo("no agents in the store; `carrier run` imports the files in characters/")
        return
    _print_columns(
        ("ID", "NAME", "DESIRED", "REVISION", "UPDATED (UTC)"),
        [
            (
                row["id"],
                row["name"],
                row["desired"],
                str(row["revision"]) if row["revision"] is not None else "-",
                _when(row["_updated"]),
            )
            for row in rows
        ],
    )
    if not workers and any(row["desired"] == "running" for row in rows):
        typer.echo(NO_WORKER.format(name="the agents marked running"))


@agents_app.command("show")
def show_cmd(
    agent: AgentArg,
    yaml_: Annotated[
        bool,
        typer.Option("--yaml", help="Print the whole character as YAML (secrets never shown)."),
    ] = False,
) -> None:
    """Show an agent: its character in short, whether it should run, its head revision."""
    from carrier.agents.diff import dump_yaml, mask_secrets
    from carrier.agents.imports import describe

    async def read(manager: AgentManager) -> tuple[AgentRecord, Desired | None, Revision]:
        record = await _agent(manager, agent)
        head = await manager.head(record.id)
        return record, await (await manager.fleet()).desired(record.id), head

    record, desired, head = _with_manager(read)
    if yaml_:
        typer.echo(dump_yaml(mask_secrets(head.character)), nl=False)
        return
    for name, value in _summary(record, desired, head, describe(head)).items():
        typer.echo(f"{name:<11} {value}")


def _summary(
    record: AgentRecord, desired: Desired | None, head: Revision, head_text: str
) -> dict[str, str]:
    data = head.character
    wanted = _desired_text(desired)
    if desired is not None:
        who = f"by {desired.actor}, " if desired.actor else ""
        wanted += f" ({who}{_when(desired.updated_at)} UTC)"
    found = data.get("settings")
    settings: dict[str, Any] = found if isinstance(found, dict) else {}
    model = settings.get("model") or data.get("modelProvider") or "-"
    secrets: set[str] = set()
    for holder in (data.get("secrets"), settings.get("secrets")):
        if isinstance(holder, dict):
            secrets.update(str(k) for k in holder)
    examples = data.get("messageExamples") or []
    rows = {
        "id": record.id,
        "name": record.name,
        "desired": wanted,
        "revision": head_text,
        "updated": f"{_when(record.updated_at)} UTC",
        "clients": ", ".join(str(c) for c in data.get("clients") or []) or "-",
        "model": str(model),
        "secrets": ", ".join(sorted(secrets)) + " (names only)" if secrets else "-",
        "bio": _lines(data.get("bio")),
        "lore": _lines(data.get("lore")),
        "topics": ", ".join(str(t) for t in data.get("topics") or []) or "-",
        "adjectives": ", ".join(str(a) for a in data.get("adjectives") or []) or "-",
        "examples": f"{len(examples)} conversations, {len(data.get('postExamples') or [])} posts",
    }
    return rows


def _lines(value: Any) -> str:
    """A text field in short: its first line, and how many more there are."""
    items = [value] if isinstance(value, str) else [str(v) for v in value or []]
    if not items:
        return "-"
    first = items[0].splitlines()[0] if items[0] else ""
    first = first if len(first) <= 70 else first[:69] + "…"
    return first + (f" (+{len(items) - 1} more)" if len(items) > 1 else "")


# -- revisions, diff, revert -----------------------------------------------------------------------
@agents_app.command("revisions")
def revisions_cmd(
    agent: AgentArg,
    limit: Annotated[int, typer.Option(min=1, max=500, help="How many, newest first.")] = 20,
    before: Annotated[
        int | None, typer.Option(min=1, help="Only revisions numbered below this (paging).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List an agent's revisions, newest first: number, when, source, who, note."""

    async def read(manager: AgentManager) -> tuple[AgentRecord, list[Revision], int]:
        record = await _agent(manager, agent)
        revisions = await manager.revisions(record.id, limit=limit, before=before)
        return record, revisions, (await manager.head(record.id)).number

    record, revisions, head = _with_manager(read)
    if as_json:
        for r in revisions:
            typer.echo(
                r.model_dump_json(
                    include={"number", "source", "actor", "note", "digest", "created_at"}
                )
            )
        return
    if not revisions:
        typer.echo(f"no revisions of {record.name} ({record.id}) below {before}")
        return
    _print_columns(
        ("REVISION", "WHEN (UTC)", "SOURCE", "BY", "NOTE"),
        [
            (
                f"{r.number} (head)" if r.number == head else str(r.number),
                _when(r.created_at),
                r.source.value,
                r.actor or "-",
                r.note or "",
            )
            for r in revisions
        ],
    )
    last = revisions[-1].number
    if len(revisions) == limit and last > 1:
        typer.echo(f"older: carrier agents revisions {record.id} --before {last}")


@agents_app.command("diff")
def diff_cmd(
    agent: AgentArg,
    revision: Annotated[int, typer.Argument(metavar="N", min=1, help="A revision number.")],
    other: Annotated[
        int | None,
        typer.Argument(
            metavar="M", min=1, help="Compare N with M (from N to M); default: N-1 to N."
        ),
    ] = None,
) -> None:
    """Show what changed: what revision N changed, or from revision N to revision M.

    Each changed field with its old and new value, then a unified diff of the characters (YAML).

    Secret references are never shown: a changed one is named only.
    """
    from carrier.agents.diff import diff_characters

    async def read(
        manager: AgentManager,
    ) -> tuple[AgentRecord, int | None, int, CharacterDiff]:
        record = await _agent(manager, agent)
        older: int | None
        if other is not None:
            older, newer = revision, other
        else:
            older, newer = (revision - 1 if revision > 1 else None), revision
        new = await manager.revision(record.id, newer)
        old = await manager.revision(record.id, older) if older is not None else None
        diff = diff_characters(
            old.character if old is not None else {},
            new.character,
            old_label=f"revision {older}" if older is not None else "(none)",
            new_label=f"revision {newer}",
        )
        return record, older, newer, diff

    record, older, newer, diff = _with_manager(read)
    since = f"revision {older}" if older is not None else "nothing"
    if diff.identical:
        typer.echo(f"{record.name} ({record.id}): revision {newer} is the same as {since}")
        return
    count = len(diff.changes)
    typer.echo(
        f"{record.name} ({record.id}): {count} field{'s' if count != 1 else ''} changed "
        f"from {since} to revision {newer}"
    )
    _print_changes(diff.changes)
    typer.echo("")
    typer.echo(diff.text, nl=False)


def _print_changes(changes: list[FieldChange]) -> None:
    for change in changes:
        if change.kind == "added":
            typer.echo(f"  added    {change.path}: {_short(change.new)}")
        elif change.kind == "removed":
            typer.echo(f"  removed  {change.path}: {_short(change.old)}")
        elif change.secret:
            typer.echo(f"  changed  {change.path} (a secret reference; not shown)")
        else:
            typer.echo(f"  changed  {change.path}: {_short(change.old)} -> {_short(change.new)}")


@agents_app.command("revert")
def revert_cmd(
    agent: AgentArg,
    revision: Annotated[
        int, typer.Argument(metavar="N", min=1, help="The revision to bring back.")
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Bring revision N's character back, as a new revision (the history is kept).

    Shows what would change and asks first, unless --yes.

    Running agents take it from their next turn, in every carrier sharing the store.
    """
    from carrier.agents.diff import diff_characters
    from carrier.fleet.model import RevisionSource

    async def revert(manager: AgentManager) -> str:
        record = await _agent(manager, agent)
        target = await manager.revision(record.id, revision)
        head = await manager.head(record.id)
        who = f"{record.name} ({record.id})"
        if target.digest == head.digest:
            return (
                f"{who}: revision {revision} is the head's character already (revision "
                f"{head.number}); nothing to revert"
            )
        diff = diff_characters(
            head.character,
            target.character,
            old_label=f"revision {head.number}",
            new_label=f"revision {revision}",
        )
        typer.echo(f"{who}: bringing revision {revision} back over revision {head.number} changes:")
        _print_changes(diff.changes)
        question = f"Store revision {revision}'s character as revision {head.number + 1}?"
        if not yes and not await asyncio.to_thread(_confirm, question):
            err("nothing changed (pass --yes to revert without asking)")
            raise typer.Exit(1)
        new = await manager.revert(record.id, revision, source=RevisionSource.CLI)
        return (
            f"{who}: revision {revision} brought back as revision {new.number}; running agents "
            f"use it from their next turn ({APPLY_NOTE})"
        )

    typer.echo(_with_manager(revert))


def _confirm(question: str) -> bool:
    try:
        return bool(typer.confirm(question, default=False))
    except typer.Abort:  # no answer (stdin closed)
        return False


# -- start, stop -----------------------------------------------------------------------------------
@agents_app.command("start")
def start_cmd(
    agent: AgentArg,
    placement: Annotated[
        str | None,
        typer.Option(
            "--placement",
            help="Run its clients only on workers of this group (carrier run --group NAME); "
            "'any' for every worker. Left out: as it was.",
        ),
    ] = None,
) -> None:
    """Mark an agent to run: every running carrier starts it (and after a restart, again).

    This command runs nothing itself.
    """
    _set_desired(agent, "running", placement=placement)


@agents_app.command("stop")
def stop_cmd(agent: AgentArg) -> None:
    """Mark an agent not to run: every running carrier stops it (and it stays stopped).

    This command runs nothing itself.
    """
    _set_desired(agent, "stopped")


def _set_desired(agent: str, state: str, *, placement: str | None = None) -> None:
    from carrier.audit.context import cli_actor
    from carrier.fleet.base import placement_from
    from carrier.fleet.model import DesiredState

    place = placement_from(placement)

    async def apply(manager: AgentManager) -> tuple[AgentRecord, DesiredState | None, list[str]]:
        record = await _agent(manager, agent)
        fleet = await manager.fleet()
        before = await fleet.desired(record.id)
        await fleet.set_desired(record.id, DesiredState(state), placement=place, actor=cli_actor())
        return record, before.state if before is not None else None, await _live_workers(fleet)

    record, before, workers = _with_manager(apply)
    who = f"{record.name} ({record.id})"
    again = " (it was already)" if before is not None and before.value == state else ""
    typer.echo(f"{who}: desired state set to {state}{again}; {APPLY_NOTE}")
    if not workers:
        typer.echo(
            NO_WORKER.format(name=record.name)
            if state == "running"
            else ("no worker (carrier run) is alive on this store: nothing runs it now")
        )
