"""``InstagramClient``: the Client-contract face of the Instagram adapter.

Instagram posting is driven by jobs (a posting plan, approvals), not by a live connection, so
the client mostly holds the publisher for its agent: :meth:`publish` is what a job handler
calls. ``start`` builds the publisher (resolving secrets; nothing is sent to Instagram), stores
the plan's schedules in the job store the host put in ``runtime.services["jobs"]`` and enqueues
uploads still waiting for a job; ``stop`` closes its connections. :meth:`accept_media` takes an
upload from ``POST /{agent_id}/media``; :meth:`answer` answers a comment, mention or DM (the
``instagram.inbound`` job, :mod:`clients.instagram.inbound`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from carrier.clients import Client
from carrier.jobs.base import JobStore
from carrier.jobs.model import Job
from carrier.jobs.schedule import Schedule
from carrier.logtail import agent_logs
from carrier.types import Memory, MemoryKind, MemoryStatus
from clients.instagram.base import Publisher
from clients.instagram.config import InstagramConfig, parse_config
from clients.instagram.errors import InstagramError
from clients.instagram.factory import build_publisher
from clients.instagram.graph.conversations import Conversations
from clients.instagram.inbound.events import InboundEvent
from clients.instagram.inbound.policy import Caps
from clients.instagram.library import MediaLibrary
from clients.instagram.plan import PLAN_JOB_KIND, PostingPlan, plan_schedule_prefix
from clients.instagram.post import Fence, Post, PublishResult, PublishStates
from clients.instagram.publish import publish_post

__all__ = ["InstagramClient"]

log = logging.getLogger(__name__)


class InstagramClient(Client):
    """The Instagram adapter for one agent."""

    name = "instagram"

    def __init__(
        self,
        *,
        runtime: Any,
        config: InstagramConfig,
        environ: Mapping[str, str],
        fernet_key: bytes | str | None = None,
        work_dir: Path | None = None,
        publisher: Publisher | None = None,
    ) -> None:
        self.runtime = runtime
        self.config = config
        self._environ = environ
        self._fernet_key = fernet_key
        self.work_dir = work_dir
        self.publisher = publisher
        self.states = PublishStates(runtime.store, str(runtime.character.agent_id))
        self._library: MediaLibrary | None = None
        self.caps = Caps(runtime.store, str(runtime.character.agent_id))
        """Reply caps of the conversations policy (per hour, per post, per person)."""
        self._talk: Conversations | None = None
        self._username: str | None = None

    # -- the plan ---------------------------------------------------------------------------
    @property
    def agent_id(self) -> str:
        return str(self.runtime.character.agent_id)

    @property
    def plan(self) -> PostingPlan:
        """The posting plan (an empty one, for uploads only, when none is configured)."""
        return self.config.plan or PostingPlan()

    @property
    def approval_required(self) -> bool:
        plan = self.plan
        return plan.approval if plan.approval is not None else self.config.require_approval

    @property
    def dry_run(self) -> bool:
        plan = self.plan
        return plan.dry_run if plan.dry_run is not None else self.config.dry_run

    @property
    def max_hashtags(self) -> int:
        rule = self.plan.caption.max_hashtags
        return rule if rule is not None else self.config.max_hashtags

    @property
    def jobs(self) -> JobStore | None:
        """The host's job store (``runtime.services["jobs"]``); ``None`` when it runs none."""
        store = getattr(self.runtime, "services", {}).get("jobs")
        return store if isinstance(store, JobStore) else None

    @property
    def library(self) -> MediaLibrary | None:
        """The plan's media folder (relative paths are read from the character file's folder)."""
        folder = self.plan.media.library
        if not folder:
            return None
        root = Path(folder).expanduser()
        source = getattr(self.runtime.character, "source", None)
        if not root.is_absolute() and source:
            root = Path(source).resolve().parent / root
        library = self._library
        if library is None or library.root != root or library.order != self.plan.media.order:
            library = MediaLibrary(
                root=root,
                store=self.runtime.store,
                agent_id=self.agent_id,
                order=self.plan.media.order,
            )
            self._library = library
        return library

    async def sync_schedules(self, *, now: datetime | None = None) -> list[Schedule]:
        """Store the plan's schedules in the job store and delete the ones it no longer has.
        Unchanged schedules keep their progress. Opens the job store if the host has not yet
        (opening is idempotent). One-off times already past when first stored are skipped."""
        jobs = self.jobs
        if jobs is None:
            if self.config.plan is not None and self.config.plan.schedule is not None:
                log.warning(
                    "instagram: %s has a posting plan but this process runs no job store; "
                    "plans run under `carrier run`",
                    self.runtime.character.name,
                )
            return []
        await jobs.open()
        now = now or jobs.clock()
        prefix = plan_schedule_prefix(self.agent_id)
        existing = {
            s.name: s
            for s in await jobs.list_schedules()
            if s.name == prefix or s.name.startswith(prefix + ":")
        }
        wanted = []
        for schedule in self.plan.schedules(self.agent_id, default_tz=self.config.timezone):
            once = getattr(schedule.spec, "at", None)
            if schedule.name not in existing and once is not None and once < now:
                log.info("instagram: skipping the past one-off time %s", once.isoformat())
                continue
            wanted.append(schedule)
        for name in set(existing) - {s.name for s in wanted}:
            await jobs.delete_schedule(name)
        stored = [await jobs.put_schedule(s) for s in wanted]
        if stored:
            log.info(
                "instagram: %s posts %s",
                self.runtime.character.name,
                "; ".join(s.spec.describe() for s in stored),
            )
        return stored

    async def accept_media(self, memory: Memory) -> Job | None:
        """Queue an upload (a ``post`` memory from ``POST /{agent_id}/media``) for posting: an
        ``instagram.post`` job due at its ``publish_at`` (or now), once per upload. Without a
        job store the upload stays ``received`` and is queued when the agent starts under
        ``carrier run``."""
        jobs = self.jobs
        if jobs is None:
            log.warning(
                "instagram: upload %s is stored; it is queued when the agent runs under "
                "`carrier run` (this process has no job worker)",
                memory.id,
            )
            return None
        await jobs.open()
        publish_at = _when(memory.content.metadata.get("publish_at"))
        job = await jobs.enqueue(
            PLAN_JOB_KIND,
            agent_id=self.agent_id,
            payload={"source": "upload", "upload_id": memory.id},
            run_at=publish_at,
            idempotency_key=f"instagram:upload:{memory.id}",
        )
        log.info("instagram: upload %s queued as job %s (due %s)", memory.id, job.id, job.run_at)
        return job

    async def queue_waiting_uploads(self) -> list[Job]:
        """Queue the uploads stored while no publisher took them (still ``received``)."""
        if self.jobs is None:
            return []
        waiting = await self.runtime.store.get_memories(
            agent_id=self.agent_id,
            kinds=[MemoryKind.POST],
            statuses=[MemoryStatus.RECEIVED],
            limit=500,
        )
        queued = []
        for memory in reversed(waiting):  # oldest first
            if memory.content.source == "api" and memory.content.attachments:
                job = await self.accept_media(memory)
                if job is not None:
                    queued.append(job)
        return queued

    async def update_config(self, new: Mapping[str, Any] | InstagramConfig) -> InstagramConfig:
        """Apply a new ``clientConfig.instagram`` (raises ConfigError when invalid) and store the
        plan's schedules again. The publisher keeps its connection settings until restart."""
        self.config = new if isinstance(new, InstagramConfig) else parse_config(new)
        await self.sync_schedules()
        await self.sync_poll()
        return self.config

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        with agent_logs(self.agent_id):  # its lines go to its agent's log tail
            await self._start()

    async def _start(self) -> None:
        if self.publisher is None:
            self.publisher = build_publisher(
                character=self.runtime.character,
                config=self.config,
                store=self.runtime.store,
                environ=self._environ,
                fernet_key=self._fernet_key,
            )
        log.info(
            "instagram client ready for %s (%s publisher%s)",
            self.runtime.character.name,
            self.publisher.name,
            ", dry run" if self.dry_run else "",
        )
        await self.sync_schedules()
        await self.sync_poll()
        await self.queue_waiting_uploads()
        self._voice(register=True)
        from clients.instagram.inbound.backends import fallbacks

        for sentence in fallbacks(self.config):
            log.warning("instagram (%s): %s", self.runtime.character.name, sentence)

    async def stop(self) -> None:
        with agent_logs(self.agent_id):
            self._voice(register=False)
            self._talk = None
            if self.publisher is not None:
                await self.publisher.aclose()

    def _voice(self, *, register: bool) -> None:
        """The persona's ``style.comment`` in comment replies' prompts, while the client runs."""
        from clients.instagram.inbound.voice import VOICE_PLUGIN, voice_plugin

        registry = getattr(self.runtime, "registry", None)
        if registry is None:
            return
        if register and VOICE_PLUGIN not in registry.plugins:
            registry.register(voice_plugin())
        elif not register and VOICE_PLUGIN in registry.plugins:
            registry.unregister(VOICE_PLUGIN)

    async def conversation_api(self) -> Conversations:
        """The calls answering people needs: the Graph API's, or instagrapi's (logged in with
        the saved session; a challenge raises :class:`OperatorActionRequired`)."""
        from clients.instagram.graph.conversations import ConversationAPI

        if self.publisher is None:
            await self.start()
        if self._talk is not None:
            return self._talk
        api = getattr(self.publisher, "api", None)
        if api is not None:
            self._talk = ConversationAPI(api)
        elif self.publisher is not None and self.publisher.name == "instagrapi":
            from clients.instagram.private import InstagrapiPublisher
            from clients.instagram.private.conversations import PrivateConversationAPI

            assert isinstance(self.publisher, InstagrapiPublisher)
            self._talk = await PrivateConversationAPI.connect(self.publisher)
        else:
            raise InstagramError(f"the {self.publisher!r} publisher cannot answer people")
        return self._talk

    async def answer(
        self,
        event: InboundEvent,
        *,
        again: bool = False,
        fence: Fence | None = None,
        approved: str | None = None,
    ) -> dict[str, Any]:
        """Answer a comment, mention or DM once (the ``instagram.inbound`` job); its result.
        ``approved``: the reply text a human approved (with ``conversations.approval``)."""
        from clients.instagram.inbound.conversation import answer_event

        api = await self.conversation_api()
        return await answer_event(
            runtime=self.runtime,
            api=api,
            event=event,
            settings=self.config.conversations,
            caps=self.caps,
            own_username=await self.own_username(),
            again=again,
            fence=fence,
            moderation=self.config.moderation,
            approved=approved,
        )

    async def own_username(self) -> str:
        """The account's @name, so a comment naming it reads as addressed to the persona:
        ``clientConfig.instagram.username``, else instagrapi's login, else read once from the
        Graph API (best effort: empty when it cannot be read)."""
        from clients.instagram.graph.api import UnclearResponse

        if self._username is not None:
            return self._username
        named = str((self.config.model_extra or {}).get("username") or "").lstrip("@")
        named = named or str(getattr(self.publisher, "username", "") or "")
        api = getattr(self.publisher, "api", None)
        if not named and api is not None:
            try:
                named = str((await api.account()).get("username") or "")
            except (InstagramError, UnclearResponse) as exc:  # asked again next time
                log.info("instagram: the account's username could not be read: %s", exc)
                return ""
        self._username = named
        return named

    async def sync_poll(self) -> Schedule | None:
        """Keep the ``instagram.poll`` schedule as ``conversations.poll`` says (stored when
        enabled, deleted when not); ``None`` without a job store or when polling is off."""
        from carrier.jobs.schedule import IntervalSpec
        from clients.instagram.inbound.poller import POLL_JOB_KIND, poll_schedule_name

        jobs = self.jobs
        if jobs is None:
            return None
        await jobs.open()
        name = poll_schedule_name(self.agent_id)
        poll = self.config.conversations.poll
        if not poll.enabled or not self.config.conversations.enabled:
            await jobs.delete_schedule(name)
            return None
        schedule = Schedule(
            name=name,
            kind=POLL_JOB_KIND,
            spec=IntervalSpec(min_s=poll.interval),
            agent_id=self.agent_id,
            max_attempts=1,
        )
        return await jobs.put_schedule(schedule)

    async def poll(self, *, jobs: JobStore, now: datetime) -> dict[str, Any]:
        """One polling round (the ``instagram.poll`` job): new comments and DMs stored as
        ``instagram.inbound`` jobs."""
        from clients.instagram.inbound.poller import poll_once

        return await poll_once(
            api=await self.conversation_api(),
            store=self.runtime.store,
            jobs=jobs,
            agent_id=self.agent_id,
            media=self.config.conversations.poll.media,
            now=now,
        )

    async def unhide(self, comment_id: str, *, actor: str) -> None:
        """Show a comment moderation hid (recorded in the audit log as ``unhide`` by ``actor``)."""
        from clients.instagram.inbound.moderation import record

        await (await self.conversation_api()).hide(comment_id, hidden=False)
        await record(
            getattr(self.runtime, "services", {}),
            agent_id=self.agent_id,
            action="unhide",
            comment_id=comment_id,
            actor=actor,
        )

    async def publish(
        self, post: Post, *, dry_run: bool | None = None, fence: Fence | None = None
    ) -> PublishResult:
        """Publish ``post`` exactly once per ``post.key`` (see :func:`publish_post`); ``fence``
        is checked right before the publishing call (a job handler's lease check)."""
        if self.publisher is None:
            await self.start()
        assert self.publisher is not None
        return await publish_post(
            post,
            publisher=self.publisher,
            states=self.states if fence is None else self.states.fenced(fence),
            config=self.config,
            work_dir=self.work_dir,
            dry_run=dry_run,
        )


def _when(value: Any) -> datetime | None:
    """An upload's ``publish_at`` (ISO text) as an aware time; ``None`` for now."""
    if not value:
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment
