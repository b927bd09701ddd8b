"""``carrier audit``: read the audit log from the terminal, with the filters of ``GET /audit``.

Loaded by the main CLI only when ``carrier audit`` runs. The log is the one beside the configured
store (``CARRIER_MONGODB_URI``, else ``<CARRIER_DATA_DIR>/carrier.db``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from carrier.cli._common import err, run_or_exit

if TYPE_CHECKING:
    from carrier.audit import AuditEvent, AuditFilter, AuditPage

__all__ = ["audit"]


def audit(
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", "-a", help="Only this agent: a character file, an agent id or a name."
        ),
    ] = None,
    actor: Annotated[
        str | None,
        typer.Option(help="Only this actor: admin, token:<name>, anonymous, cli:<user>, system."),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            help="Only this kind (api.call, agent.start, memory.forget, ...; repeatable)."
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="From this time on: an age (24h, 7d) or a date and time.")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Before this time: an age (24h, 7d) or a date and time.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many, newest first.")] = 50,
    cursor: Annotated[
        str | None, typer.Option(help="Continue after a previous listing (the cursor it gave).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Read the audit log: who did what to which agent, newest first.

    Every state-changing API call is there, allowed or refused.

    So are agent starts and stops, forgets, retention runs, Instagram posts and approvals.
    """
    import re

    from carrier.audit.model import KIND_PATTERN, AuditFilter
    from carrier.cli._when import parse_time

    for value in kind or ():
        if not re.match(KIND_PATTERN, value):
            raise typer.BadParameter(
                f"{value!r} is not a kind; kinds look like api.call or agent.start",
                param_hint="--kind",
            )
    where = AuditFilter(
        actor=actor,
        kinds=tuple(kind or ()),
        since=parse_time(since, option="--since") if since else None,
        until=parse_time(until, option="--until") if until else None,
    )
    page = run_or_exit(_read(where, agent, limit, cursor))
    if as_json:
        for event in page.items:
            typer.echo(event.model_dump_json())
    elif not page.items:
        typer.echo("no audit entries match")
    else:
        _table(page.items)
    if page.next_cursor:
        err(f"... more: pass --cursor {page.next_cursor} (with the same filters), or raise --limit")


async def _read(where: AuditFilter, agent: str | None, limit: int, cursor: str | None) -> AuditPage:
    from dataclasses import replace

    from carrier.audit.base import AuditLog
    from carrier.datadir import private_data_dir
    from carrier.errors import ConfigError
    from carrier.settings import load_settings

    settings = private_data_dir(load_settings())  # the log may be made here: owner-only
    if agent is not None:
        from carrier.assemble import open_store
        from carrier.lookup import resolve_agent

        store = await open_store(settings)
        try:
            where = replace(
                where, agent_id=(await resolve_agent(store, agent, allow_unknown_id=True)).id
            )
        finally:
            await store.close()
    async with AuditLog.from_settings(settings) as log:
        try:
            return await log.list_events(where, limit=limit, cursor=cursor)
        except ValueError as exc:
            raise ConfigError(f"--cursor: {exc}") from None


def _table(events: list[AuditEvent]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for header in ("at (UTC)", "kind", "actor", "agent", "action", "result"):
        table.add_column(header, no_wrap=header != "action", overflow="fold")
    for event in events:
        status = event.detail.get("status")
        result = f"{event.result} ({status})" if status is not None else event.result
        table.add_row(
            event.at.strftime("%Y-%m-%d %H:%M:%S"),
            event.kind,
            event.actor or "-",
            event.agent_id or "-",
            event.action
            + (f" {event.target}" if event.target and event.kind != "api.call" else ""),
            result,
        )
    Console(highlight=False, soft_wrap=False).print(table)
