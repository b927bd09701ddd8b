"""The messages a server owner sees when the Discord client cannot start, each with its fix."""

from __future__ import annotations

from carrier.install import install_hint

__all__ = [
    "INSTALL",
    "NO_TOKEN",
    "describe_start_failure",
    "is_refusal",
    "privileged_intents_message",
    "real_error",
]

INSTALL = "the Discord client needs discord.py, which is not installed: " + install_hint(
    "discord.py"
)

NO_TOKEN = (
    "DISCORD_API_TOKEN is not set: put the bot token in the environment or .env, and reference it "
    "in the character as settings.secrets.DISCORD_API_TOKEN: $DISCORD_API_TOKEN"
)

_PORTAL = "https://discord.com/developers/applications"


def privileged_intents_message(members: bool = False) -> str:
    wanted = '"Message Content Intent"'
    if members:
        wanted += ' and "Server Members Intent"'
    return (
        "Discord refused the connection (close code 4014): this bot asks for privileged intents "
        f"that are not enabled for its application. Open {_PORTAL}, choose the application, go "
        f"to Bot → Privileged Gateway Intents, enable {wanted}, save, and start again."
    )


_REFUSED_TOKEN = (
    "Discord refused the bot token (DISCORD_API_TOKEN): copy a fresh token from "
    f"{_PORTAL} → your application → Bot → Reset Token, set it in the environment, and start the "
    "agent again"
)

_FATAL_CLOSE_CODES = {4004, 4010, 4011, 4012, 4013, 4014}
"""Gateway close codes that the same identify would get again: authentication failed, invalid
shard, sharding required, invalid API version, invalid or disallowed intents."""


def real_error(exc: BaseException) -> BaseException:
    """The error behind ``exc``: discord.py's first gateway connection, when it fails, ends in
    an ``AttributeError`` raised while handling the real one (discord.py issue #10520)."""
    if isinstance(exc, AttributeError) and exc.__context__ is not None:
        return exc.__context__
    return exc


def is_refusal(exc: BaseException) -> bool:
    """Whether Discord refused the bot for good (a bad token, intents not enabled, a bad shard
    setting), so that retrying with the same settings cannot help."""
    import discord

    exc = real_error(exc)
    if isinstance(exc, discord.LoginFailure | discord.PrivilegedIntentsRequired):
        return True
    if isinstance(exc, discord.ConnectionClosed):
        return exc.code in _FATAL_CLOSE_CODES
    if isinstance(exc, discord.HTTPException) and not isinstance(exc, discord.DiscordServerError):
        return 400 <= exc.status < 500 and exc.status != 429
    return False


def describe_start_failure(exc: BaseException | None, *, members: bool = False) -> str:
    """A one-paragraph explanation of why the connection could not be made."""
    import discord  # only called from the client, where discord is importable

    if exc is None:
        return "the Discord connection closed before the bot was ready"
    exc = real_error(exc)
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return privileged_intents_message(members)
    if isinstance(exc, discord.LoginFailure):
        return _REFUSED_TOKEN
    if isinstance(exc, discord.ConnectionClosed) and exc.code == 4004:
        return _REFUSED_TOKEN
    if isinstance(exc, discord.DiscordServerError):
        return f"Discord is unavailable (HTTP {exc.status}): {exc.text or 'no reason given'}"
    if isinstance(exc, discord.ConnectionClosed):
        return f"Discord closed the connection (code {exc.code}): {exc.reason or 'no reason given'}"
    return _network(exc)


def _network(exc: BaseException) -> str:
    import aiohttp  # discord.py's HTTP library

    if isinstance(exc, aiohttp.WSServerHandshakeError):
        return f"the Discord gateway refused the connection (HTTP {exc.status})"
    if isinstance(exc, TimeoutError):
        return "Discord did not answer in time"
    if isinstance(exc, aiohttp.ClientConnectionError | OSError):
        return f"could not reach Discord: {exc or type(exc).__name__}"
    return f"could not connect to Discord: {type(exc).__name__}: {exc}"
