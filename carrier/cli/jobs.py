"""``carrier jobs ...``: inspect and steer durable jobs from the terminal.

Loaded by the main CLI only when ``carrier jobs`` runs. The job store is the one the settings
name (``<CARRIER_DATA_DIR>/carrier.db`` by default).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from carrier.cli._common import run_or_exit

if TYPE_CHECKING:
    from rich.console import Console

    from carrier.jobs.base import JobStore
    from carrier.jobs.model import Job, JobState

__all__ = ["jobs_app"]

T = TypeVar("T")

jobs_app = typer.Typer(
    name="jobs",
    help="Durable jobs: list, show, cancel, retry, approve, reject; and schedules.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _with_store(action: Callable[[JobStore], Awaitable[T]]) -> T:
    """Open the job store in the data dir, run ``action``, close it; errors exit non-zero."""
    from carrier.datadir import private_data_dir
    from carrier.jobs.service import JobService
    from carrier.settings import load_settings

    store = JobService.from_settings(
        private_data_dir(load_settings())
    ).store  # MongoDB when CARRIER_MONGODB_URI is set

    async def main() -> T:
        async with store:
            return await action(store)

    return run_or_exit(main())


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def _short(text: str | None, width: int = 60) -> str:
    if not text:
        return ""
    line = text.splitlines()[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def _print(*renderables: Any) -> None:
    console = _console()
    for renderable in renderables:
        console.print(renderable)


def _job_line(job: Job) -> str:
    return f"{job.id} ({job.kind}) is now {job.state}" + (
        f": {job.last_error}" if job.last_error and job.state != "pending" else ""
    )


@jobs_app.command("list")
def list_cmd(
    state: Annotated[
        list[str] | None, typer.Option("--state", help="Only jobs in this state (repeatable).")
    ] = None,
    kind: Annotated[str | None, typer.Option(help="Only jobs of this kind.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only jobs of this agent id.")] = None,
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 50,
) -> None:
    """List jobs, newest first."""
    from rich.table import Table

    states = [_state(value) for value in state] if state else None
    jobs = _with_store(
        lambda store: store.list_jobs(states=states, kind=kind, agent_id=agent, limit=limit)
    )
    if not jobs:
        typer.echo("no jobs")
        return
    rows = [
        (
            job.id,
            job.kind,
            job.agent_id or "-",
            str(job.state),
            f"{job.attempts}/{job.max_attempts}",
            _when(job.run_at),
        )
        for job in jobs
    ]
    headers = ("id", "kind", "agent", "state", "tries", "run at (UTC)")
    widths = [max(len(header), *(len(row[i]) for row in rows)) for i, header in enumerate(headers)]
    # Every column keeps its width (ids whole, to copy into other commands); the last error
    # gets what is left of the terminal.
    room = max(_console().width - sum(widths) - 3 * (len(widths) + 1) - 1, 12)
    table = Table()
    for header, width in zip(headers, widths, strict=True):
        table.add_column(header, no_wrap=True, min_width=width)
    table.add_column("last error", no_wrap=True, max_width=room)
    for row, job in zip(rows, jobs, strict=True):
        table.add_row(*row, _short(job.last_error, room))
    _print(table)


def _state(value: str) -> JobState:
    from carrier.jobs.model import JobState

    try:
        return JobState(value)
    except ValueError:
        choices = ", ".join(s.value for s in JobState)
        raise typer.BadParameter(f"{value!r} is not a job state; use one of {choices}") from None


def _progress(job: Job) -> str:
    text = json.dumps(job.progress, indent=2, ensure_ascii=False) if job.progress else "-"
    return text + (" (committed: its effect is done; it cannot fail)" if job.committed else "")


@jobs_app.command("show")
def show_cmd(job_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Show one job: its fields, payload, result and history."""
    from rich.table import Table

    from carrier.jobs.errors import JobNotFound

    async def get(store: JobStore) -> Job:
        job = await store.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    job = _with_store(get)
    fields = Table.grid(padding=(0, 2))
    rows = {
        "id": job.id,
        "kind": job.kind,
        "agent": job.agent_id or "-",
        "state": str(job.state),
        "attempts": f"{job.attempts}/{job.max_attempts}",
        "crashes": f"{job.crashes}/{job.max_crashes} (taken over from a lost worker; not attempts)",
        "run at": _when(job.run_at),
        "lease": f"{job.lease_owner} until {_when(job.lease_expires_at)}"
        if job.lease_owner
        else "-",
        "idempotency key": job.idempotency_key or "-",
        "timeout": f"{job.timeout_s:g} s" if job.timeout_s else "worker default",
        "approved at": _when(job.approved_at),
        "approval expires": _when(job.approval_expires_at),
        "created": _when(job.created_at),
        "updated": _when(job.updated_at),
        "last error": job.last_error or "-",
        "payload": json.dumps(job.payload, indent=2, ensure_ascii=False),
        "progress": _progress(job),
        "result": json.dumps(job.result, indent=2, ensure_ascii=False) if job.result else "-",
    }
    for name, value in rows.items():
        fields.add_row(f"[bold]{name}[/bold]", value)
    history = Table("at (UTC)", "state", "by", "note", title="history")
    for event in job.history:
        history.add_row(_when(event.at), str(event.state), event.worker or "-", event.note or "")
    _print(fields, history)


@jobs_app.command("cancel")
def cancel_cmd(
    job_id: Annotated[str, typer.Argument(metavar="ID")],
    reason: Annotated[str | None, typer.Option(help="Why; kept as the job's error.")] = None,
) -> None:
    """Cancel a job that has not finished (a running one stops at its next lease renewal)."""
    typer.echo(_job_line(_with_store(lambda store: store.cancel(job_id, reason=reason))))


@jobs_app.command("retry")
def retry_cmd(job_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Put a failed or cancelled job back to pending, due now, with fresh attempts."""
    typer.echo(_job_line(_with_store(lambda store: store.retry(job_id))))


def _edited_payload(job: Job, sets: list[str], payload: str | None) -> dict[str, Any] | None:
    if payload is None and not sets:
        return None
    data: dict[str, Any] = dict(job.payload)
    if payload is not None:
        try:
            loaded = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"--payload is not JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise typer.BadParameter("--payload must be a JSON object")
        data = loaded
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--set {item!r}: expected KEY=VALUE")
        try:
            data[key] = json.loads(raw)
        except json.JSONDecodeError:
            data[key] = raw  # plain text
    return data


@jobs_app.command("approve")
def approve_cmd(
    job_id: Annotated[str, typer.Argument(metavar="ID")],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Edit one payload field: KEY=VALUE (JSON or text)."),
    ] = None,
    payload: Annotated[
        str | None, typer.Option(help="Replace the whole payload with this JSON object.")
    ] = None,
    by: Annotated[str | None, typer.Option(help="Who approves (kept in the history).")] = None,
) -> None:
    """Approve a job awaiting approval, optionally editing its payload; it runs next."""
    from carrier.jobs.errors import JobNotFound

    async def approve(store: JobStore) -> Job:
        job = await store.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        edited = _edited_payload(job, set_ or [], payload)
        return await store.approve(job_id, payload=edited, by=by)

    typer.echo(_job_line(_with_store(approve)))


@jobs_app.command("reject")
def reject_cmd(
    job_id: Annotated[str, typer.Argument(metavar="ID")],
    reason: Annotated[str | None, typer.Option(help="Why; kept as the job's error.")] = None,
) -> None:
    """Reject a job awaiting approval: it is cancelled."""
    typer.echo(_job_line(_with_store(lambda store: store.reject(job_id, reason=reason))))


@jobs_app.command("schedules")
def schedules_cmd() -> None:
    """List the schedules and when each one's next job is due."""
    from rich.table import Table

    schedules = _with_store(lambda store: store.list_schedules())
    if not schedules:
        typer.echo("no schedules")
        return
    table = Table("name", "kind", "agent", "when", "next (UTC)", "status")
    for schedule in schedules:
        status = "finished" if schedule.finished else "on" if schedule.enabled else "off"
        table.add_row(
            schedule.name,
            schedule.kind,
            schedule.agent_id or "-",
            schedule.spec.describe(),
            _when(schedule.next_at),
            status,
        )
    _print(table)
