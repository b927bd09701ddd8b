"""``carrier knowledge ...``: give an agent documents to know, list them, remove them.

Loaded by the main CLI only when ``carrier knowledge`` runs. The store is the
one ``carrier run`` uses (``open_store(load_settings())``) and the embedder the default one, so
what is added here is what the running agent recalls. Heavy imports happen inside commands.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from carrier.cli._common import run_or_exit
from carrier.lookup import AgentRef, resolve_agent

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from carrier.knowledge import KnowledgeReport
    from carrier.knowledge.report import Phase
    from carrier.memory.base import Store
    from carrier.memory.embedder import Embedder

__all__ = ["KnowledgeCliDeps", "knowledge_app"]

T = TypeVar("T")

knowledge_app = typer.Typer(
    name="knowledge",
    help="Documents an agent knows: add files and folders, sync a character's list, list, remove.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

AgentOption = Annotated[
    str,
    typer.Option(
        "--agent", "-a", help="A character file, or the id or name of an agent in the store."
    ),
]


@dataclass
class KnowledgeCliDeps:
    """What the commands open, when not the defaults; pass one as ``obj`` to
    ``CliRunner.invoke`` (tests, embedding Carrier in another tool)."""

    embedder: Callable[[], Embedder] | None = None
    store: Callable[[], Awaitable[Store]] | None = None


_Agent = AgentRef


class _Session:
    """The store (opened) and the embedder (made on first use) for one command."""

    def __init__(self, deps: KnowledgeCliDeps) -> None:
        self.deps = deps
        self.store: Store | None = None
        self._embedder: Embedder | None = None

    async def __aenter__(self) -> _Session:
        if self.deps.store is not None:
            self.store = await self.deps.store()
        else:
            from carrier.assemble import open_store
            from carrier.datadir import private_data_dir
            from carrier.settings import load_settings

            self.store = await open_store(private_data_dir(load_settings()))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.store is not None:
            await self.store.close()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            if self.deps.embedder is not None:
                self._embedder = self.deps.embedder()
            else:
                for name, value in (
                    ("HF_HUB_OFFLINE", "1"),
                    ("TRANSFORMERS_OFFLINE", "1"),
                    ("TOKENIZERS_PARALLELISM", "false"),
                ):
                    os.environ.setdefault(name, value)
                from carrier.assemble import default_embedder

                self._embedder = default_embedder()
        return self._embedder

    def opened(self) -> Store:
        assert self.store is not None
        return self.store


def _run(ctx: typer.Context, action: Callable[[_Session], Awaitable[T]]) -> T:
    """Open a session, run ``action``, close it; user mistakes exit 1, runtime failures 2."""

    deps = ctx.obj if isinstance(ctx.obj, KnowledgeCliDeps) else KnowledgeCliDeps()

    async def main() -> T:
        async with _Session(deps) as session:
            return await action(session)

    return run_or_exit(main())


async def _agent(store: Store, given: str) -> _Agent:
    """An agent named by a character file, an agent id (even one not stored yet), or a name."""
    return await resolve_agent(store, given, allow_unknown_id=True)


class _Bars:
    """Rich progress bars on stderr, one per phase, made when the phase reports its total."""

    LABELS = {"read": "Reading documents", "embed": "Embedding chunks"}

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console: Console = Console(stderr=True, highlight=False)
        self.progress: Progress = Progress(
            TextColumn("{task.description:<18}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
        )
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, phase: Phase, done: int, total: int) -> None:
        task = self.tasks.get(phase)
        if task is None:
            if total == 0:
                return
            task = self.tasks[phase] = self.progress.add_task(self.LABELS[phase], total=total)
        self.progress.update(task, completed=done, total=total)

    def __enter__(self) -> _Bars:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def _report(agent: _Agent, report: KnowledgeReport) -> None:
    who = agent.id if agent.name == agent.id else f"{agent.name} ({agent.id})"
    typer.echo(f"{who}: {report.summary()}")
    for source, reason in report.failed.items():
        typer.echo(f"  could not read {source}: {reason}", err=True)
    for source in report.empty:
        typer.echo(f"  {source} has no text (a scanned PDF needs OCR first)", err=True)
    if report.failed:
        raise typer.Exit(1)


@knowledge_app.command()
def add(
    ctx: typer.Context,
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...", help="Files (.txt, .md, .pdf) and folders (read recursively)."
        ),
    ],
    agent: AgentOption,
    shared: Annotated[
        bool, typer.Option(help="Mark the documents as shared (each agent keeps its own copy).")
    ] = False,
) -> None:
    """Add files and folders to an agent's knowledge.

    Adding again updates changed files; adding a folder again also forgets files that left it.
    """
    from carrier.knowledge import add_knowledge

    async def action(session: _Session) -> tuple[_Agent, KnowledgeReport]:
        store = session.opened()
        who = await _agent(store, agent)
        if who.note:
            typer.echo(f"note: {who.note}", err=True)
        with _Bars() as bars:
            report = await add_knowledge(
                store, session.embedder, agent_id=who.id, paths=paths, shared=shared, progress=bars
            )
        return who, report

    _report(*_run(ctx, action))


@knowledge_app.command()
def sync(
    ctx: typer.Context,
    character: Annotated[Path, typer.Argument(metavar="CHARACTER", help="A character file.")],
) -> None:
    """Ingest the knowledge a character file lists, now rather than at start-up.

    New and changed documents are embedded; documents no longer listed are forgotten.
    """
    from carrier.character import load_character
    from carrier.knowledge import sync_knowledge

    async def action(session: _Session) -> tuple[_Agent, KnowledgeReport]:
        loaded = await asyncio.to_thread(load_character, character)
        with _Bars() as bars:
            report = await sync_knowledge(
                session.opened(),
                session.embedder,
                agent_id=loaded.agent_id,
                character=loaded,
                progress=bars,
            )
        return _Agent(loaded.agent_id, loaded.name), report

    _report(*_run(ctx, action))


@knowledge_app.command("list")
def list_cmd(ctx: typer.Context, agent: AgentOption) -> None:
    """List the documents an agent knows."""
    from carrier.knowledge import list_knowledge

    async def action(session: _Session) -> tuple[_Agent, list[Any]]:
        who = await _agent(session.opened(), agent)
        return who, await list_knowledge(session.opened(), who.id)

    who, docs = _run(ctx, action)
    if not docs:
        typer.echo(
            f"{who.name} knows no documents; add some with: carrier knowledge add PATH --agent {agent}"
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{who.name}: {len(docs)} document(s)", title_justify="left")
    for column in ("source", "title", "chunks", "words", "origin", "updated"):
        numeric = column in ("chunks", "words")
        table.add_column(column, justify="right" if numeric else "left", overflow="fold")
    for doc in docs:
        table.add_row(
            doc.source + (" (shared)" if doc.shared else ""),
            doc.title,
            str(doc.chunks),
            str(doc.words),
            doc.origin,
            doc.updated_at.strftime("%Y-%m-%d %H:%M"),
        )
    Console(highlight=False, soft_wrap=True).print(table)


@knowledge_app.command()
def remove(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE", help="A source as `list` shows it, a path, or a folder of them."
        ),
    ],
    agent: AgentOption,
) -> None:
    """Forget a document (or every document under a folder)."""
    from carrier.knowledge import remove_knowledge

    absolute = Path(os.path.abspath(source)).as_posix()

    async def action(session: _Session) -> tuple[_Agent, list[Any]]:
        store = session.opened()
        who = await _agent(store, agent)
        gone = await remove_knowledge(store, who.id, source)
        if not gone:  # a path given relative to here names a document added by absolute path
            gone = await remove_knowledge(store, who.id, absolute)
        return who, gone

    who, gone = _run(ctx, action)
    if not gone:
        typer.echo(
            f"{who.name} has no document {source!r}; see: carrier knowledge list --agent {agent}",
            err=True,
        )
        raise typer.Exit(1)
    for doc in gone:
        typer.echo(f"forgot {doc.source} ({doc.chunks} chunk(s))")
        if doc.origin == "character":
            typer.echo(
                "  the character file lists it: it comes back at the next start unless removed there"
            )
