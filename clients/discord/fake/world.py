"""The fake Discord's state: the bots, guilds with channels, threads and members, DMs, messages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from clients.discord.fake import payloads as p
from clients.discord.fake.payloads import Ids, Json

__all__ = ["Bot", "Guild", "World"]


@dataclass
class Guild:
    id: int
    name: str
    owner_id: int
    bot_role: int
    channels: dict[str, int] = field(default_factory=dict)
    """Channel and thread ids by name."""
    channel_payloads: list[Json] = field(default_factory=list)
    thread_payloads: list[Json] = field(default_factory=list)
    members: dict[int, Json] = field(default_factory=dict)
    roles: list[Json] = field(default_factory=list)

    def payload(self) -> Json:
        return p.guild(
            self.id,
            self.name,
            owner_id=self.owner_id,
            roles=self.roles,
            channels=self.channel_payloads,
            threads=self.thread_payloads,
            members=list(self.members.values()),
        )


@dataclass(frozen=True)
class Bot:
    """A bot application: REST calls and gateway identifies with ``token`` act as this bot (its
    application id is its user id, as for bots Discord creates)."""

    token: str
    id: int
    user: Json

    @property
    def name(self) -> str:
        return str(self.user["global_name"])


class World:
    def __init__(self, *, bot_name: str, token: str = "fake-bot-token") -> None:
        self.ids = Ids()
        self.bot_id = self.ids()
        self.application_id = self.bot_id
        self.bot = p.user(self.bot_id, bot_name.lower(), bot=True, global_name=bot_name)
        self.default_bot = Bot(token=token, id=self.bot_id, user=self.bot)
        """The bot every guild has (``bot``, ``bot_id``): the one of single-bot tests."""
        self.bots: dict[str, Bot] = {token: self.default_bot}
        """Every bot by token: the default one, then those of :meth:`add_bot`."""
        self.owner = p.user(self.ids(), "owner")
        self.guilds: dict[int, Guild] = {}
        self.users: dict[int, Json] = {}
        self.channel_guild: dict[int, int | None] = {}
        self.dm_channels: dict[int, int] = {}
        self.messages: dict[int, Json] = {}
        self.files: dict[str, tuple[bytes, str]] = {}

    @property
    def base_url(self) -> str:
        raise NotImplementedError

    # -- building the world ---------------------------------------------------------------------
    def add_guild(self, name: str, channels: list[str] = ["general"]) -> Guild:  # noqa: B006
        gid = self.ids()
        bot_role = self.ids()
        guild = Guild(id=gid, name=name, owner_id=int(self.owner["id"]), bot_role=bot_role)
        guild.roles = [
            p.role(gid, "@everyone"),
            p.role(
                bot_role, self.bot["global_name"], permissions=p.ALL_PERMISSIONS, bot_id=self.bot_id
            ),
        ]
        guild.members[self.bot_id] = p.member(self.bot, roles=[bot_role])
        guild.members[int(self.owner["id"])] = p.member(self.owner)
        self.guilds[gid] = guild
        for name_ in channels:
            self.add_channel(guild, name_)
        return guild

    def add_bot(self, name: str, *, token: str | None = None, guilds: Iterable[Guild] = ()) -> Bot:
        """Another bot application (its own token, user and application id), a member of
        ``guilds`` (:meth:`join` adds it to more). It sees only the guilds it is a member of;
        DMs stay with the default bot."""
        data = p.user(self.ids(), name.lower(), bot=True, global_name=name)
        bot = Bot(token=token or f"fake-bot-token-{data['id']}", id=int(data["id"]), user=data)
        if bot.token in self.bots:
            raise ValueError(f"fake Discord: a bot already has the token {bot.token!r}")
        self.bots[bot.token] = bot
        for guild in guilds:
            self.join(guild, bot)
        return bot

    def join(self, guild: Guild, bot: Bot) -> None:
        """``bot`` joins ``guild``, with a managed role of its own holding every permission."""
        if bot.id in guild.members:
            return
        role_id = self.ids()
        guild.roles.append(p.role(role_id, bot.name, permissions=p.ALL_PERMISSIONS, bot_id=bot.id))
        guild.members[bot.id] = p.member(bot.user, roles=[role_id])

    def add_channel(self, guild: Guild, name: str) -> int:
        cid = self.ids()
        guild.channels[name] = cid
        guild.channel_payloads.append(p.channel(cid, guild.id, name, len(guild.channel_payloads)))
        self.channel_guild[cid] = guild.id
        return cid

    def add_thread(self, guild: Guild, parent: str, name: str) -> int:
        tid = self.ids()
        guild.channels[name] = tid
        guild.thread_payloads.append(
            p.thread(tid, guild.id, guild.channels[parent], int(self.owner["id"]), name)
        )
        self.channel_guild[tid] = guild.id
        return tid

    def add_user(self, name: str, *, bot: bool = False, global_name: str | None = None) -> Json:
        data = p.user(self.ids(), name, bot=bot, global_name=global_name)
        self.users[int(data["id"])] = data
        return data

    def add_member(
        self, guild: Guild, name: str, *, bot: bool = False, nick: str | None = None
    ) -> Json:
        data = self.add_user(name, bot=bot)
        guild.members[int(data["id"])] = p.member(data, nick=nick)
        return data

    def host(self, filename: str, data: bytes, content_type: str) -> Json:
        """A file served by the fake CDN, as a message attachment payload."""
        aid = self.ids()
        key = f"{aid}-{filename}"
        self.files[key] = (data, content_type)
        url = f"{self.base_url}/cdn/{key}"
        return {
            "id": str(aid),
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }

    def delete_message(self, message_id: int) -> None:
        """Someone deleted a message (a later reply to it finds it gone)."""
        self.messages.pop(message_id, None)

    # -- lookups ----------------------------------------------------------------------------------
    def guild_of(self, channel_id: int) -> int | None:
        return self.channel_guild.get(channel_id)

    def bot_with_token(self, token: str) -> Bot | None:
        return self.bots.get(token)

    def bots_in(self, guild_id: int | None) -> list[Bot]:
        """The bots that see a guild's events: its bot members (DMs: the default bot)."""
        if guild_id is None:
            return [self.default_bot]
        members = self.guilds[guild_id].members
        return [bot for bot in self.bots.values() if bot.id in members]

    def dm_channel(self, user_data: Json) -> int:
        uid = int(user_data["id"])
        if uid not in self.dm_channels:
            cid = self.ids()
            self.dm_channels[uid] = cid
            self.channel_guild[cid] = None
        return self.dm_channels[uid]

    def make_message(
        self,
        author: Json,
        content: str,
        *,
        channel: int | None,
        mentions: list[Json] = (),  # type: ignore[assignment]
        mention_roles: list[int] = (),  # type: ignore[assignment]
        reply_to: int | None = None,
        attachments: list[Json] = (),  # type: ignore[assignment]
        webhook_id: int | None = None,
        flags: int = 0,
    ) -> Json:
        channel_id = channel if channel is not None else self.dm_channel(author)
        guild_id = self.guild_of(channel_id)
        guild = self.guilds.get(guild_id) if guild_id is not None else None
        reference = referenced = None
        if reply_to is not None:
            referenced = self.messages.get(reply_to)
            reference = {"message_id": str(reply_to), "channel_id": str(channel_id)}
            if guild_id is not None:
                reference["guild_id"] = str(guild_id)
        data = p.message(
            self.ids(),
            channel_id,
            author,
            content,
            guild_id=guild_id,
            author_member=guild.members.get(int(author["id"])) if guild else None,
            mentions=list(mentions),
            mention_roles=list(mention_roles),
            attachments=list(attachments),
            reference=reference,
            referenced=referenced,
            webhook_id=webhook_id,
            flags=flags,
        )
        self.messages[int(data["id"])] = data
        return data

    def make_interaction(
        self,
        user_data: Json,
        name: str,
        *,
        channel: int,
        options: dict[str, Any] | None,
        permissions: str,
    ) -> Json:
        guild_id = self.guild_of(channel)
        guild = self.guilds.get(guild_id) if guild_id is not None else None
        opts = [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()]
        data: Json = {
            "id": str(self.ids()),
            "application_id": str(self.application_id),
            "type": 2,
            "token": f"interaction-token-{self.ids()}",
            "version": 1,
            "data": {"id": str(self.ids()), "name": name, "type": 1, "options": opts},
            "channel_id": str(channel),
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 8 * 1024 * 1024,
            "app_permissions": p.ALL_PERMISSIONS,
        }
        if guild is not None:
            data["guild_id"] = str(guild.id)
            data["guild_locale"] = "en-US"
            data["channel"] = next(
                c for c in guild.channel_payloads + guild.thread_payloads if int(c["id"]) == channel
            )
            data["member"] = {**guild.members[int(user_data["id"])], "permissions": permissions}
            data["context"] = 0
        else:
            data["channel"] = p.dm_channel(channel, user_data)
            data["user"] = user_data
            data["context"] = 1
        return data
