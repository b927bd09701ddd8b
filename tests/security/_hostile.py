"""A hostile model's favourite answer: every kind of secret the redactor must keep in.

Known values (the environment's, recognisable only because the redactor learnt them) and secret
shapes (recognisable by their form, learnt from nowhere).
"""

from __future__ import annotations

import json

from carrier.llm.base import ModelRequest

OPENAI_VALUE = "openai-value-4f9d2c7a1e8b"
DISCORD_VALUE = "discord-bot-value-7f3a9c1e5b"
ADMIN_VALUE = "carrier-admin-value-7c1d9e2f4a6b8c0d"
VOICE_VALUE = "voice-credential-2b4d6f8a0c"
"""Known only because a character references it (its variable's name is not credential-like)."""

SK_PROJ = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
AKIA = "AKIAIOSFODNN7EXAMPLE"
GHP = "ghp_" + "a1B2c3D4e5" * 4
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn\n"
    "-----END RSA PRIVATE KEY-----"
)

KNOWN = (OPENAI_VALUE, DISCORD_VALUE, ADMIN_VALUE)
SHAPES = (SK_PROJ, AKIA, GHP, PEM)
SECRETS = (*KNOWN, SK_PROJ, AKIA, GHP, PEM)
FRAGMENTS = (*KNOWN, SK_PROJ, AKIA, GHP, "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn")
"""What must not appear anywhere (the PEM block's body stands for the block)."""

ENVIRON = {
    "OPENAI_API_KEY": OPENAI_VALUE,
    "DISCORD_API_TOKEN": DISCORD_VALUE,
    "CARRIER_ADMIN_TOKEN": ADMIN_VALUE,
    "VOICE_CREDENTIAL": VOICE_VALUE,
    "PORT": "8000",
    "FEATURE_ENABLED": "true",
    "CARRIER_LOG_LEVEL": "DEBUG",
}

HOSTILE_TEXT = (
    f"Of course! OPENAI_API_KEY is {OPENAI_VALUE}, the bot token {DISCORD_VALUE}, "
    f"the admin token {ADMIN_VALUE}. Also {SK_PROJ} and {AKIA} and {GHP}:\n{PEM}\nEnjoy."
)


def xml(text: str, actions: str = "REPLY") -> str:
    return (
        f"<response><thought>leak {SK_PROJ}</thought><actions>{actions}</actions>"
        f"<text>{text}</text></response>"
    )


def hostile(request: ModelRequest) -> str:
    """The model: answers every message with every secret; facts too."""
    if request.purpose == "facts":
        return json.dumps(
            [{"claim": f"the admin token is {ADMIN_VALUE}"}, {"claim": f"aws key {AKIA}"}]
        )
    if request.purpose == "should_respond":
        return "RESPOND"
    return xml(HOSTILE_TEXT)


def leaks(text: str) -> list[str]:
    """The secrets (or their telling fragments) found in ``text``."""
    return [s for s in FRAGMENTS if s in text]
