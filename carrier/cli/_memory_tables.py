"""The tables ``carrier memory`` prints: memories, and the people an agent knows.

Both are read to find a person to forget, so the full entity id is always shown whole, on a line
of its own (it is copied from here into ``carrier memory forget``), and never folded; the
free text wraps instead. Both stay readable in a 100-column terminal (and lose nothing in 80):
a memory's kind (and score) sits under its date, its id under its text, a person's platform id
under the platform. Imported only by the commands that print.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from carrier.memory.people import Person
    from carrier.types import Memory

__all__ = ["print_memories", "print_people"]

TEXT_WIDTH = 70
"""A memory's text is cut to this many characters: the table is an overview, ``--json`` whole."""


def _short(text: str, width: int = TEXT_WIDTH) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _who(memory: Memory, names: Mapping[str, str]) -> Text:
    """Their name (as they were called then, else as their record has it) over their entity id."""
    name = str(memory.content.metadata.get("speaker") or names.get(memory.entity_id) or "")
    cell = Text(name + "\n" if name else "")
    cell.append(memory.entity_id, style="dim")
    return cell


def print_memories(
    memories: Sequence[Memory],
    names: Mapping[str, str],
    *,
    scores: Sequence[float] | None = None,
    console: Console | None = None,
) -> None:
    """One row per memory: when and what kind (and its score, from a search), who (name and
    entity id), the text and its id. ``names`` gives a name for entity ids whose memories carry
    no speaker (facts, notes)."""
    # Two lines a row: a blank line between rows keeps each memory's lines together.
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_lines=True)
    table.add_column("created (UTC)\nkind" + (" · score" if scores is not None else ""))
    table.add_column("who\nentity id", no_wrap=True)
    table.add_column("text\nmemory id", overflow="fold", min_width=16, ratio=1)
    for i, m in enumerate(memories):
        when = Text(m.created_at.strftime("%Y-%m-%d %H:%M:%S") + "\n")
        when.append(m.kind.value + (f" · {scores[i]:.3f}" if scores is not None else ""), "dim")
        text = Text(_short(m.content.text) + "\n")
        text.append(m.id, style="dim")
        table.add_row(when, _who(m, names), text)
    (console or Console(highlight=False, soft_wrap=False)).print(table)


def print_people(
    people: Sequence[Person], *, numbered: bool = False, console: Console | None = None
) -> None:
    """One row per person: entity id, names, platform over platform id, and how many memories
    they left over how many of them are messages. ``numbered`` adds a ``#`` column to choose
    one by."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_lines=True)
    if numbered:
        table.add_column("#", justify="right", no_wrap=True)
    table.add_column("entity id", no_wrap=True)
    table.add_column("names", min_width=8, overflow="fold")
    table.add_column("platform\nplatform id", no_wrap=True)
    table.add_column("memories\nmessages", justify="right", no_wrap=True)
    for i, person in enumerate(people, start=1):
        row: list[str | Text] = [
            person.entity_id,
            Text(", ".join(person.names) or "-"),  # Text: a name is never read as rich markup
            Text(f"{person.platform}\n{person.platform_id}" if person.platform else "-"),
            f"{person.memories}\n{person.messages}",
        ]
        table.add_row(*([str(i)] if numbered else []), *row)
    (console or Console(highlight=False, soft_wrap=False)).print(table)
