"""Approve or reject drafts (an Instagram post, a tool call waiting for a human) with buttons in a
channel.

When an agent also runs on Discord and its ``clientConfig.discord`` names an approval channel,
each draft that waits for approval is posted there with **Approve** and **Reject** buttons (a
tool call shows the tool, who asked, where, and the arguments)::

    clientConfig:
      discord:
        approvalChannel: instagram-drafts          # a channel id, or a name (#name works too)
        approvalRoles: [Editors, "234567890123"]   # who may click (role names or ids)

Members with one of ``approvalRoles``, or with the Manage Server permission, may click; anyone
else is told so privately and nothing changes. A click approves or rejects the job in the job
store (``runtime.services["jobs"]``) and updates the message. The buttons' custom ids
(``carrier:approve:<job id>``, ``carrier:reject:<job id>``) carry everything a click needs, and
they are registered as dynamic items, so the buttons keep working after a restart.

An approved tool call runs on the job worker, which posts its result back to the channel where
the person asked through :meth:`ApprovalDesk.post_tool_result`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from weakref import WeakKeyDictionary

import discord

from carrier.audit.base import audit_from
from carrier.audit.model import AuditKind, AuditResult
from carrier.errors import ClientError, ConfigError
from carrier.jobs.base import JobStore
from carrier.jobs.errors import JobStateError
from carrier.jobs.model import Job
from carrier.tools.approvals import NOTICE_JOB_KIND, TOOL_JOB_KIND, sender_of
from carrier.tools.records import record_approval

if TYPE_CHECKING:
    from clients.discord.client import DiscordClient

__all__ = [
    "ApprovalButton",
    "ApprovalDesk",
    "ApprovalSettings",
    "approval_view",
    "custom_id",
    "draft_message",
    "tool_call_message",
]

log = logging.getLogger(__name__)

Action = Literal["approve", "reject"]
CUSTOM_ID = r"carrier:(?P<action>approve|reject):(?P<job_id>[A-Za-z0-9][A-Za-z0-9_.\-]{0,80})"
MAX_ATTACHMENT = 8 * 1024 * 1024
"""Larger media is named in the message rather than attached."""
_IMAGE = {".jpg", ".jpeg", ".png", ".webp", ".gif"}


def custom_id(action: Action, job_id: str) -> str:
    return f"carrier:{action}:{job_id}"


@dataclass(frozen=True, slots=True)
class ApprovalSettings:
    """Where drafts go and who may decide; read from ``clientConfig.discord``."""

    channel: str | None = None
    roles: frozenset[str] = frozenset()
    """Role ids, and role names in lower case."""

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any] | None) -> ApprovalSettings:
        extra = extra or {}
        channel = extra.get("approvalChannel", extra.get("approval_channel"))
        roles = extra.get("approvalRoles", extra.get("approval_roles")) or []
        if channel is not None and not isinstance(channel, str | int):
            raise ConfigError(
                "clientConfig.discord.approvalChannel: expected a channel id or name, "
                f"got {type(channel).__name__}"
            )
        if isinstance(roles, str | int):
            roles = [roles]
        if not isinstance(roles, list) or not all(isinstance(r, str | int) for r in roles):
            raise ConfigError(
                "clientConfig.discord.approvalRoles: expected a list of role names or ids"
            )
        name = str(channel).strip().lstrip("#") if channel is not None else ""
        return cls(
            channel=name or None,
            roles=frozenset(str(r).strip().lower() for r in roles if str(r).strip()),
        )


class ApprovalButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=CUSTOM_ID
):
    """An Approve or Reject button; rebuilt from its custom id on every click."""

    def __init__(self, action: Action, job_id: str) -> None:
        approve = action == "approve"
        super().__init__(
            discord.ui.Button(
                label="Approve" if approve else "Reject",
                style=discord.ButtonStyle.success if approve else discord.ButtonStyle.danger,
                custom_id=custom_id(action, job_id),
            )
        )
        self.action: Action = action
        self.job_id = job_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[discord.Client],
        item: discord.ui.Item[Any],
        match: re.Match[str],
    ) -> ApprovalButton:
        action: Action = "approve" if match["action"] == "approve" else "reject"
        return cls(action, match["job_id"])

    async def callback(self, interaction: discord.Interaction[discord.Client]) -> None:
        desk = _DESKS.get(interaction.client)
        if desk is not None:
            await desk.on_click(interaction, self.action, self.job_id)


def approval_view(job_id: str) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(ApprovalButton("approve", job_id))
    view.add_item(ApprovalButton("reject", job_id))
    return view


def _quote(text: str, limit: int) -> str:
    text = text.strip() or "(no caption)"
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "\u2026"
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


def reply_message(job: Job, agent_name: str) -> str:
    """The text of an Instagram reply waiting for approval: who, what it answers (a stranger's
    words, quoted, mentions escaped), the reply quoted, when it expires."""
    answers = job.payload.get("answers")
    answers = answers if isinstance(answers, dict) else {}
    kind = str(answers.get("kind") or "message")
    who = discord.utils.escape_markdown(str(answers.get("from") or "someone"))
    lines = [
        f"**Reply on Instagram awaiting approval** from {agent_name} \u00b7 job `{job.id}`",
        f"To {who}'s {kind}:",
        _quote(str(answers.get("text") or ""), 600),
        "Reply:",
        _quote(str(job.payload.get("reply") or ""), 1000),
    ]
    if job.approval_expires_at is not None:
        lines.append(f"Expires {discord.utils.format_dt(job.approval_expires_at, 'R')}.")
    return discord.utils.escape_mentions("\n".join(lines))[:2000]


def draft_message(job: Job, agent_name: str) -> str:
    """The text of a draft's message: who, the caption quoted, the media, when it expires."""
    draft = job.payload.get("draft")
    draft = draft if isinstance(draft, dict) else {}
    media = [Path(str(p)).name for p in draft.get("media") or []]
    head = f"**Draft for Instagram** from {agent_name} \u00b7 job `{job.id}`"
    if draft.get("dry_run"):
        head += " \u00b7 dry run (nothing will be published)"
    lines = [
        discord.utils.escape_mentions(head),
        discord.utils.escape_mentions(_quote(str(draft.get("caption") or ""), 1400)),
        f"Media: {', '.join(media) or '(none)'} ({draft.get('kind', 'post')})",
    ]
    if job.approval_expires_at is not None:
        lines.append(f"Expires {discord.utils.format_dt(job.approval_expires_at, 'R')}.")
    return "\n".join(lines)[:2000]


def tool_call_message(job: Job, agent_name: str) -> str:
    """The text of a parked tool call's message: the tool and its endpoint, who asked and where,
    the arguments (as the model gave them: text from a stranger, shown in a code block, mentions
    escaped), when it expires."""
    payload = job.payload
    sender = sender_of(job)
    raw = payload.get("room")
    room: dict[str, Any] = raw if isinstance(raw, dict) else {}
    where = f"#{room.get('channel_name')}" if room.get("channel_name") else room.get("platform")
    arguments = json.dumps(payload.get("arguments") or {}, indent=1, ensure_ascii=False)
    if len(arguments) > 1200:
        arguments = arguments[:1199] + "\u2026"
    arguments = arguments.replace("```", "`\u200b``")
    who = discord.utils.escape_markdown(sender.name)
    lines = [
        f"**Tool call awaiting approval** from {agent_name} \u00b7 job `{job.id}`",
        f"{payload.get('tool')}: {payload.get('method')} {payload.get('host')}",
        f"Asked by {who} ({sender.platform} `{sender.platform_id}`) in {where or 'a room'}",
        f"Arguments:\n```json\n{arguments}\n```",
    ]
    if job.approval_expires_at is not None:
        lines.append(f"Expires {discord.utils.format_dt(job.approval_expires_at, 'R')}.")
    return discord.utils.escape_mentions("\n".join(lines))[:2000]


def _attachment(paths: list[str]) -> discord.File | None:
    for raw in paths[:1]:
        path = Path(raw)
        if (
            path.suffix.lower() in _IMAGE
            and path.is_file()
            and path.stat().st_size <= MAX_ATTACHMENT
        ):
            return discord.File(path, filename=path.name)
    return None


class ApprovalDesk:
    """The approval side of one :class:`~clients.discord.client.DiscordClient`."""

    def __init__(self, client: DiscordClient) -> None:
        self.client = client
        self.settings  # noqa: B018 - refuse a bad configuration when the client is built
        client.bot.add_dynamic_items(ApprovalButton)
        _DESKS[client.bot] = self

    @property
    def settings(self) -> ApprovalSettings:
        return ApprovalSettings.from_extra(self.client.config.model_extra)

    @property
    def jobs(self) -> JobStore | None:
        store = getattr(self.client.runtime, "services", {}).get("jobs")
        return store if isinstance(store, JobStore) else None

    # -- posting a draft -------------------------------------------------------------------
    async def post_draft(self, job: Job) -> str | None:
        """Post the draft of ``job`` in the approval channel with its buttons; the message id,
        or ``None`` when no approval channel is configured."""
        settings = self.settings
        if settings.channel is None:
            return None
        channel = await self._channel(settings.channel)
        name = self.client.runtime.character.name
        if job.kind == TOOL_JOB_KIND:
            file, content = None, tool_call_message(job, name)
        elif "reply" in job.payload and "draft" not in job.payload:  # an Instagram reply
            file, content = None, reply_message(job, name)
        else:
            draft = job.payload.get("draft")
            paths = [str(p) for p in (draft.get("media") or [])] if isinstance(draft, dict) else []
            file = await asyncio.to_thread(_attachment, paths)
            content = draft_message(job, name)
        view = approval_view(job.id)
        none = discord.AllowedMentions.none()
        if file is not None:
            message = await channel.send(content, view=view, file=file, allowed_mentions=none)
        else:
            message = await channel.send(content, view=view, allowed_mentions=none)
        self.client.stats.sent += 1
        log.info("discord: draft of job %s posted for approval in #%s", job.id, channel)
        return str(message.id)

    async def post_tool_result(self, channel_id: str, text: str) -> str | None:
        """Post the outcome of an approved (or rejected) tool call in the channel where it was
        asked for; the message id. No one is pinged."""
        channel = await self._channel(channel_id)
        message = await channel.send(
            discord.utils.escape_mentions(text)[:2000],
            allowed_mentions=discord.AllowedMentions.none(),
        )
        self.client.stats.sent += 1
        return str(message.id)

    async def _channel(self, wanted: str) -> discord.abc.Messageable:
        bot = self.client.bot
        found: Any = None
        if wanted.isdigit():
            found = bot.get_channel(int(wanted))
            if found is None:
                try:
                    found = await bot.fetch_channel(int(wanted))
                except discord.HTTPException:
                    found = None
        else:
            for channel in bot.get_all_channels():
                if isinstance(channel, discord.TextChannel) and channel.name == wanted:
                    found = channel
                    break
        if not isinstance(found, discord.abc.Messageable):
            raise ClientError(
                f"the approval channel {wanted!r} (clientConfig.discord.approvalChannel) is not a "
                "text channel the bot can see; give its id or exact name and invite the bot"
            )
        return found

    # -- clicks ----------------------------------------------------------------------------
    def allowed(self, interaction: discord.Interaction[discord.Client]) -> bool:
        """Manage Server (or administrator) in that channel, or one of the approval roles."""
        if interaction.guild is None:
            return False
        permissions = interaction.permissions
        if permissions.manage_guild or permissions.administrator:
            return True
        roles = self.settings.roles
        member = interaction.user
        if not roles or not isinstance(member, discord.Member):
            return False
        return any(str(r.id) in roles or r.name.lower() in roles for r in member.roles)

    async def on_click(
        self, interaction: discord.Interaction[discord.Client], action: Action, job_id: str
    ) -> None:
        try:
            await self._decide(interaction, action, job_id)
        except Exception:
            self.client.stats.errors += 1
            log.exception("discord: the %s click on job %s failed", action, job_id)
            if not interaction.response.is_done():
                await interaction.response.send_message(
                    "Something went wrong; the draft is unchanged. Try again, or use the API.",
                    ephemeral=True,
                )

    async def _decide(
        self, interaction: discord.Interaction[discord.Client], action: Action, job_id: str
    ) -> None:
        async def say(text: str) -> None:
            await interaction.response.send_message(text, ephemeral=True)

        if not self.allowed(interaction):
            roles = ", ".join(sorted(self.settings.roles)) or "none configured"
            await say(
                "Only members with the Manage Server permission or an approval role "
                f"({roles}) may approve or reject drafts."
            )
            return
        jobs = self.jobs
        if jobs is None:
            await say("This bot runs without a job store here; approve the draft through the API.")
            return
        job = await jobs.get(job_id)
        if job is None or job.agent_id != self.client.runtime.agent_id:
            await say("I don't know this draft (it may have been deleted).")
            return
        user = interaction.user
        who = f"discord:{user.name} ({user.id})"
        try:
            if action == "approve":
                await jobs.approve(job_id, by=who)
            else:
                await jobs.reject(job_id, reason=f"rejected on Discord by {user.name}")
        except JobStateError:
            current = await jobs.get(job_id)
            state = current.state.value if current is not None else "gone"
            await say(f"This draft is already {state.replace('_', ' ')}; nothing changed.")
            return
        if action == "reject" and job.kind == TOOL_JOB_KIND:
            await self._tool_rejected(job, who, user.name)
        elif action == "reject":  # an approval is recorded when the approved draft goes ahead
            await audit_from(self.client.runtime.services).record(
                AuditKind.INSTAGRAM_APPROVAL,
                actor=who,
                agent_id=job.agent_id,
                action="reject",
                target=job_id,
                result=AuditResult.REFUSED,
                detail={"decision": "rejected", "job_kind": job.kind},
            )
        verdict = "Approved" if action == "approve" else "Rejected"
        original = interaction.message.content if interaction.message is not None else ""
        decided = "\n\n" + discord.utils.escape_mentions(f"**{verdict}** by {user.display_name}")
        content = original[: 2000 - len(decided)] + decided
        await interaction.response.edit_message(content=content, view=None)
        log.info("discord: job %s %s by %s", job_id, verdict.lower(), who)

    async def _tool_rejected(self, job: Job, who: str, name: str) -> None:
        """A rejected tool call: audited, and the room told (by the job worker, which keeps it in
        the history too)."""
        services = self.client.runtime.services
        await record_approval(
            services,
            job_id=job.id,
            agent_id=job.agent_id,
            tool=str(job.payload.get("tool") or ""),
            decision="rejected",
            by=who,
            sender=sender_of(job),
            reason=f"rejected on Discord by {name}",
        )
        jobs = self.jobs
        if jobs is not None:
            await jobs.enqueue(
                NOTICE_JOB_KIND,
                agent_id=job.agent_id,
                payload={"job_id": job.id, "event": "rejected"},
                idempotency_key=f"tool-notice-rejected:{job.id}",
            )


_DESKS: WeakKeyDictionary[discord.Client, ApprovalDesk] = WeakKeyDictionary()
"""The desk of each bot, for button callbacks (which get the bot, not the Carrier client)."""
