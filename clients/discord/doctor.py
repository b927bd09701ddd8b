"""``carrier doctor`` checks for a persona's Discord bot (the ``carrier.doctor`` entry point).

Over Discord's REST API, through discord.py and so at the base URL the client itself uses (the
loopback fake in tests): the token is accepted (``GET /users/@me``), and the application has the
Message Content intent enabled (the application's flags, ``GATEWAY_MESSAGE_CONTENT`` or its
``_LIMITED`` form for bots in fewer than 100 servers), without which the gateway refuses the bot
with close code 4014. The Server Members intent is checked only when ``membersIntent`` asks for it.
Nothing connects to the gateway.
"""

from __future__ import annotations

import asyncio
import importlib.util
import warnings
from collections.abc import Sequence
from typing import Any

from carrier.doctor.base import ClientTarget, Result, fail, ok, skip
from carrier.errors import ConfigError
from clients.discord.config import parse_config
from clients.discord.errors import INSTALL

__all__ = ["check"]

_PORTAL = "https://discord.com/developers/applications"
_INTENTS = f"open {_PORTAL}, choose the bot's application, Bot → Privileged Gateway Intents"


def _secret_fix(var: str) -> str:
    return (
        f"put the bot token in {var} (the environment or .env) and reference it in the character "
        f"as settings.secrets.DISCORD_API_TOKEN: ${var}"
    )


async def check(target: ClientTarget) -> Sequence[Result]:
    """Token, then intents; a step that cannot run says which earlier step it waits on."""
    if importlib.util.find_spec("discord") is None:
        return [fail("discord", "discord.py is not installed", INSTALL)]
    var = target.secret_var("DISCORD_API_TOKEN")
    try:
        config = parse_config(target.config)
    except ConfigError as exc:
        return [
            fail(
                "discord config",
                str(exc).replace("\n", " "),
                "fix clientConfig.discord in the character (carrier validate shows every problem)",
            )
        ]
    token = target.secret("DISCORD_API_TOKEN")
    if not token:
        return [fail("discord token", f"{var} is not set", _secret_fix(var))]
    with warnings.catch_warnings():
        # discord.py imports the stdlib's audioop (voice support), deprecated since Python 3.11.
        warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
        import discord
    from aiohttp import ClientError

    client = discord.Client(intents=discord.Intents.none())
    try:
        try:
            async with asyncio.timeout(target.timeout):
                await client.login(token)  # GET /users/@me, then the application's info
        except discord.LoginFailure:
            return [
                fail(
                    "discord token",
                    f"Discord refused the token in {var} (401 Unauthorized)",
                    f"copy a fresh token from {_PORTAL} → the application → Bot → Reset Token, "
                    f"and set {var}",
                ),
                skip("discord intents", "needs an accepted token"),
            ]
        except discord.HTTPException as exc:
            return [
                fail(
                    "discord token",
                    f"Discord answered HTTP {exc.status} ({exc.text or 'no reason given'})",
                    "try again later; check https://discordstatus.com",
                )
            ]
        except (OSError, TimeoutError, ClientError, discord.DiscordException) as exc:
            return [
                fail(
                    "discord token",
                    f"could not reach Discord's API at {discord.http.Route.BASE} "
                    f"({type(exc).__name__})",
                    "check this machine's connection to discord.com (DNS, firewall, proxy)",
                )
            ]
        user = client.user
        results = [ok("discord token", f"accepted: bot {user} (id {user.id if user else '?'})")]
        results += _intents(client.application_flags, members=config.members_intent)
        return results
    finally:
        await client.close()


def _intents(flags: Any, *, members: bool) -> list[Result]:
    results = []
    if flags.gateway_message_content or flags.gateway_message_content_limited:
        results.append(ok("discord intents", "Message Content intent enabled"))
    else:
        results.append(
            fail(
                "discord intents",
                "the Message Content intent is not enabled for the bot's application: Discord "
                "would refuse the connection (close code 4014)",
                f'{_INTENTS}, enable "Message Content Intent", save',
            )
        )
    if members:
        if flags.gateway_guild_members or flags.gateway_guild_members_limited:
            results.append(ok("discord members intent", "Server Members intent enabled"))
        else:
            results.append(
                fail(
                    "discord members intent",
                    "clientConfig.discord.membersIntent asks for the Server Members intent, which "
                    "is not enabled for the bot's application",
                    f'{_INTENTS}, enable "Server Members Intent", save; or set membersIntent: false',
                )
            )
    return results
