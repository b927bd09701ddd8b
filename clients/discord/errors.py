"""The messages a server owner sees when the Discord client cannot start, each with its fix."""

from __future__ import annotations

from carrier.install import install_hint

__all__ = [
    "INSTALL",
    "NO_TOKEN",
    "describe_start_failure",
    "privileged_intents_message",
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


def describe_start_failure(exc: BaseException | None, *, members: bool = False) -> str:
    """A one-paragraph explanation of why the connection could not be made."""
    import discord  # only called from the client, where discord is importable

    if exc is None:
        return "the Discord connection closed before the bot was ready"
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return privileged_intents_message(members)
    if isinstance(exc, discord.LoginFailure):
        return (
            "Discord refused the bot token (DISCORD_API_TOKEN): copy a fresh token from "
            f"{_PORTAL} → your application → Bot → Reset Token, and set it in the environment"
        )
    if isinstance(exc, discord.ConnectionClosed):
        return f"Discord closed the connection (code {exc.code}): {exc.reason or 'no reason given'}"
    return f"could not connect to Discord: {type(exc).__name__}: {exc}"
