"""Importing a character file into the store, without overwriting a change made elsewhere.

The store is the truth: ``carrier run characters/`` imports each file, it does not replace what
the store holds. What the file does is decided from three things: the stored head revision, the
file's content, and the import mark (which file content the last import matched, at which
revision):

- no agent with the file's id: the file creates it (revision 1) and it should run;
- the file says what the head says: nothing to store (the mark is brought up to date);
- the file is unchanged since its last import: the store's newer revisions stand;
- the file changed and the head is still the revision of its last import: a new revision;
- the file changed and so did the store (an API or console edit, a revert), or the agent was
  created elsewhere and never imported: :class:`ImportConflict`, naming both revisions, unless
  ``prefer`` says which wins (``file``: a new revision from the file; ``store``: the head stays,
  and the file is not asked about again until it changes).

A store written before revisions existed gets its character recorded as revision 1 (source
``store``) on first contact; its file then imports as before (the file wins), once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from carrier.agents.status import LoadReport
from carrier.character import character_data, load_character
from carrier.errors import CarrierError, UserError
from carrier.fleet.model import (
    DesiredState,
    ImportMark,
    Revision,
    RevisionSource,
    character_digest,
)

if TYPE_CHECKING:
    from carrier.agents.manager import AgentManager

__all__ = [
    "ImportAction",
    "ImportConflict",
    "ImportOutcome",
    "Prefer",
    "import_file",
    "load_files",
]

Prefer = Literal["file", "store"]


class ImportAction(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    KEPT_STORE = "kept store"
    """The store changed since the file's import and the file did not: the store stands."""


@dataclass
class ImportOutcome:
    agent_id: str
    name: str
    action: ImportAction
    revision: int
    """The head after the import."""
    note: str | None = None
    """Said to the user (e.g. which stored revision is kept over an unchanged file)."""


def describe(revision: Revision) -> str:
    """``revision 5 (api by admin, 2026-11-25 03:10 UTC)``."""
    who = f" by {revision.actor}" if revision.actor else ""
    when = revision.created_at.strftime("%Y-%m-%d %H:%M UTC")
    return f"revision {revision.number} ({revision.source.value}{who}, {when})"


class ImportConflict(UserError):
    """The file and the store both changed since the last import."""

    def __init__(self, path: str, agent_id: str, head: Revision, imported: int | None) -> None:
        name = head_name(head)
        agent = f"{name} ({agent_id})" if name != agent_id else agent_id
        self.path, self.agent_id, self.head, self.imported = path, agent_id, head, imported
        since = (
            f"changed since it was imported as revision {imported}"
            if imported is not None
            else "was never imported"
        )
        super().__init__(
            f"{path} {since}, and agent {agent} was changed elsewhere: the store holds "
            f"{describe(head)}. The file was not imported; the agent keeps revision "
            f"{head.number}. Choose: `carrier run --prefer file` (the file becomes revision "
            f"{head.number + 1}) or `carrier run --prefer store` (keep revision {head.number}; "
            f"the file is ignored until it changes again). `carrier agents revisions {agent_id}` "
            "lists the revisions"
        )


async def import_file(
    manager: AgentManager, path: str | Path, *, prefer: Prefer | None = None
) -> ImportOutcome:
    """Import one character file (see the module's docstring). Raises :class:`ImportConflict`,
    or the file's :class:`~carrier.errors.CharacterError`."""
    character = load_character(path)
    data = character_data(character)
    digest = character_digest(data)
    agent_id, where = character.agent_id, str(path)
    fleet = await manager.fleet()

    async def mark(revision: int) -> None:
        await fleet.mark_import(
            ImportMark(agent_id=agent_id, path=where, file_digest=digest, revision=revision)
        )

    async def run_if_new() -> None:  # an agent that predates desired states ran from its file
        if await fleet.desired(agent_id) is None:
            await fleet.set_desired(agent_id, DesiredState.RUNNING, actor=where)

    if await manager.store.get_agent(agent_id) is None:
        await manager.create(character, source=RevisionSource.FILE, actor=where)
        head = await manager.head(agent_id)
        await mark(head.number)
        await fleet.set_desired(agent_id, DesiredState.RUNNING, actor=where)
        return ImportOutcome(agent_id, character.name, ImportAction.CREATED, head.number)

    head, upgraded = await manager.history(agent_id)
    last = await fleet.import_mark(agent_id)
    await run_if_new()
    if head.digest == digest:
        await mark(head.number)
        return ImportOutcome(agent_id, character.name, ImportAction.UNCHANGED, head.number)
    if last is not None and last.file_digest == digest and prefer != "file":
        note = f"{where} is unchanged since its import; the store's {describe(head)} stands"
        return ImportOutcome(agent_id, head_name(head), ImportAction.KEPT_STORE, head.number, note)
    moved = upgraded is False and (last is None or head.number != last.revision)
    if moved and prefer is None:
        raise ImportConflict(where, agent_id, head, last.revision if last else None)
    if moved and prefer == "store":
        await mark(head.number)
        note = f"kept the store's {describe(head)} over {where} (--prefer store)"
        return ImportOutcome(agent_id, head_name(head), ImportAction.KEPT_STORE, head.number, note)
    over = f"over {describe(head)} (--prefer file)" if moved else None
    await manager.update(agent_id, character, source=RevisionSource.FILE, actor=where, note=over)
    new = await manager.head(agent_id)
    await mark(new.number)
    return ImportOutcome(agent_id, character.name, ImportAction.UPDATED, new.number, over)


def head_name(head: Revision) -> str:
    name = head.character.get("name")
    return name if isinstance(name, str) else head.agent_id


async def load_files(
    manager: AgentManager, paths: Iterable[str | Path], *, prefer: Prefer | None = None
) -> list[LoadReport]:
    """Import each character file (:func:`import_file`), then run its agent if it should run.
    A file that does not load, or conflicts with the store, is reported (``error``); the others
    still start."""
    reports: list[LoadReport] = []
    for path in paths:
        report = LoadReport(path=str(path))
        reports.append(report)
        try:
            report.outcome = await import_file(manager, path, prefer=prefer)
            status = await manager.status(report.outcome.agent_id)
            report.status = await manager.run(status.record.id) if status.should_run else status
        except CarrierError as exc:
            report.error = str(exc)
    return reports
