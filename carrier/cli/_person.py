"""Picking the one person ``carrier memory forget`` names, when a name fits several or none.

Forgetting cannot be undone, so nothing here guesses: one match is the person; several are
listed and the user picks one by number (or, with ``--yes``, where nobody can be asked, nothing
is deleted and the entity ids to pass are shown); none says how to list the people there are.
"""

from __future__ import annotations

import shlex

import typer
from rich.console import Console

from carrier.cli._common import err
from carrier.cli._memory_tables import print_people
from carrier.memory.people import Person

__all__ = ["choose"]


def choose(people: list[Person], *, who: str, agent: str, yes: bool) -> Person:
    """The one person of ``people`` (those ``who`` matched for ``agent``, as typed); when several,
    the one the user picks. Exits 1 when there is none, and with ``yes`` when there are several."""
    if not people:
        err(
            f"nobody called {who!r} (entity id, platform id, name or username) is known to "
            f"agent {agent}; list the people it knows with "
            f"`carrier memory people -a {shlex.quote(agent)}`"
        )
        raise typer.Exit(1)
    if len(people) == 1:
        return people[0]
    if yes:
        err(f"{len(people)} people match {who!r}:")
        print_people(people, console=Console(stderr=True, highlight=False, soft_wrap=False))
        err(
            "nothing was deleted: pass the entity id of the one to forget "
            f"(carrier memory forget ENTITY_ID -a {shlex.quote(agent)} --yes)"
        )
        raise typer.Exit(1)
    typer.echo(f"{len(people)} people match {who!r}:")
    print_people(people, numbered=True)
    choice: int = typer.prompt(
        f"Which one (1-{len(people)}; Ctrl-C to cancel)",
        value_proc=lambda answer: _number(answer, len(people)),
    )
    return people[choice - 1]


def _number(answer: str, last: int) -> int:
    """``answer`` as a number from 1 to ``last``; anything else is asked again."""
    number = int(answer) if answer.strip().isdigit() else 0
    if not 1 <= number <= last:
        raise typer.BadParameter(f"{answer!r}: answer with a number from 1 to {last}")
    return number
