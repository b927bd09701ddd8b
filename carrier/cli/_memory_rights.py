"""``carrier memory people``, ``forget`` and ``prune``: the people an agent knows, forgetting
one of them, and deleting memories by age. Registered on the ``memory`` group by
:mod:`carrier.cli.memory`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from carrier.cli._common import err
from carrier.cli._memory_common import (
    AgentOption,
    JsonOption,
    PlatformOption,
    kinds_of,
    with_agent,
    with_audit,
)

if TYPE_CHECKING:
    from carrier.audit.base import AuditLog
    from carrier.memory.base import Store
    from carrier.memory.people import Person
    from carrier.memory.rights import ForgetReport

__all__ = ["forget_cmd", "people_cmd", "prune_cmd"]


def people_cmd(
    agent: AgentOption,
    who: Annotated[
        str | None,
        typer.Argument(
            metavar="WHO",
            help="Only the people this names, as `forget` finds them: an entity id, a platform "
            "id, a name or a username.",
        ),
    ] = None,
    platform: PlatformOption = None,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many, by name.")] = 200,
    as_json: JsonOption = False,
) -> None:
    """List the people an agent knows: entity id, names, platform id, messages and memories.

    Find someone here before `carrier memory forget`.
    """
    from dataclasses import asdict

    from carrier.memory.people import find_people, list_people

    async def run(store: Store, agent_id: str) -> list[Person]:
        if who is not None:
            return await find_people(store, agent_id=agent_id, who=who, platform=platform)
        return await list_people(store, agent_id=agent_id, platform=platform)

    people = with_agent(agent, run)
    if as_json:
        for person in people[:limit]:
            typer.echo(json.dumps(asdict(person)))
    elif not people:
        typer.echo(f"nobody matches {who!r}" if who is not None else "nobody yet")
    else:
        from carrier.cli._memory_tables import print_people

        print_people(people[:limit])
    if len(people) > limit:
        err(f"... and {len(people) - limit} more: pass WHO or --platform, or raise --limit")


def forget_cmd(
    who: Annotated[
        str,
        typer.Argument(
            metavar="WHO",
            help="The person: an entity id, a platform id, a name or a username "
            "(see `carrier memory people`).",
        ),
    ],
    agent: AgentOption,
    platform: PlatformOption = None,
    keep_replies: Annotated[
        bool, typer.Option("--keep-replies", help="Keep the agent's replies to them.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Forget a person, in every room of the agent.

    WHO is matched against entity ids, platform ids (e.g. a Discord user id), names and
    usernames (ignoring case), on every platform unless --platform is given. When several
    people match, they are listed and you choose one (with --yes: nothing is deleted, exit 1).
    No match: exit 1.

    Deletes the messages they sent, the facts about them and the agent's replies to them.

    Summaries that retell them and their entity record (names, memberships) go too.
    """
    from carrier.cli._person import choose
    from carrier.lookup import resolve_agent
    from carrier.memory.people import find_people
    from carrier.memory.rights import forget_entity

    async def run(store: Store, audit: AuditLog) -> tuple[Person, ForgetReport]:
        ref = await resolve_agent(store, agent)
        found = await find_people(store, agent_id=ref.id, who=who, platform=platform)
        person = choose(found, who=who, agent=agent, yes=yes)
        if not yes:
            typer.confirm(
                f"Delete everything agent {ref.name} remembers of {person.describe()}? "
                "This cannot be undone",
                abort=True,
            )
        return person, await forget_entity(
            store,
            agent_id=ref.id,
            entity_id=person.entity_id,
            include_replies=not keep_replies,
            audit=audit,
        )

    person, report = with_audit(run)
    typer.echo(
        f"forgot {person.label}: {report.total} memories "
        f"({report.messages} messages, {report.facts} facts, {report.replies} replies, "
        f"{report.summaries} summaries, {report.other} other) in {len(report.rooms)} room(s)"
        + ("; their entity record (names, platform id) too" if report.entity else "")
    )


def prune_cmd(
    agent: AgentOption,
    older_than: Annotated[
        str,
        typer.Option("--older-than", help="Delete what is older than this age: 30d, 12h, 2w, 90m."),
    ],
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", help="Only memories of this kind (repeatable; default: message)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")
    ] = False,
) -> None:
    """Delete an agent's memories older than an age (messages unless --kind says otherwise).

    Nothing is summarized first (the daily retention job does that when the character's
    settings.retention asks). Knowledge is managed with `carrier knowledge`, not here.

    The run is recorded in the audit log (memory.prune); a dry run changes nothing and is not.
    """
    from datetime import UTC, datetime

    from carrier.cli._when import parse_age
    from carrier.types import MemoryKind

    age = parse_age(older_than, option="--older-than")
    kinds = kinds_of(kind) or [MemoryKind.MESSAGE]
    if MemoryKind.KNOWLEDGE in kinds:
        raise typer.BadParameter(
            "knowledge is not pruned by age; remove documents with `carrier knowledge remove`",
            param_hint="--kind",
        )
    before = datetime.now(UTC) - age

    async def run(store: Store, audit: AuditLog) -> tuple[str, int]:
        from carrier.audit.context import current_actor
        from carrier.audit.model import AuditKind
        from carrier.lookup import resolve_agent
        from carrier.retention.prune import prune_memories

        ref = await resolve_agent(store, agent)
        count = await prune_memories(
            store, agent_id=ref.id, kinds=kinds, before=before, dry_run=dry_run
        )
        if not dry_run:
            await audit.record(
                AuditKind.MEMORY_PRUNE,
                actor=current_actor(),
                agent_id=ref.id,
                action="prune",
                detail={
                    "older_than": older_than,
                    "before": before.isoformat(),
                    "kinds": [str(k) for k in kinds],
                    "deleted": count,
                },
            )
        return ref.name, count

    name, count = with_audit(run)
    what = "/".join(str(k) for k in kinds)
    if dry_run:
        typer.echo(f"would delete {count} {what} memories of {name} older than {older_than}")
    else:
        typer.echo(f"deleted {count} {what} memories of {name} older than {older_than}")
