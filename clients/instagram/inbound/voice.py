"""The persona's comment voice: ``style.comment`` in the prompt of a comment's or mention's turn.

The persona's sampled prompt always carries ``style.all`` and ``style.chat`` (DMs are chats). A
comment is public and short-lived, and a character may say how it writes one
(``style: {comment: [...]}``); this ``before_generate`` hook adds those lines to the system
message (the operator's words, never the data message) of Instagram comment and mention turns.
"""

from __future__ import annotations

from typing import Any

from carrier.llm.base import ChatMessage
from carrier.pipeline.base import HookPoint, HookResult, Turn
from carrier.plugins import Plugin

__all__ = ["VOICE_PLUGIN", "comment_style", "voice_plugin"]

VOICE_PLUGIN = "instagram-comment-voice"


def comment_style(character: Any) -> list[str]:
    style = getattr(character, "style", None)
    return [str(line) for line in (getattr(style, "comment", None) or []) if str(line).strip()]


def voice_plugin() -> Plugin:
    """The plugin an Instagram client registers on its runtime while it runs."""

    async def hook(point: HookPoint, turn: Turn) -> HookResult | None:
        meta = turn.message.metadata.get("instagram") or {}
        if turn.message.platform != "instagram" or meta.get("kind") not in ("comment", "mention"):
            return None
        lines = comment_style(turn.runtime.character)
        if not lines or not turn.prompt or turn.prompt[0].role != "system":
            return None
        name = turn.runtime.character.name
        section = f"\n\n## How {name} writes Instagram comments\n" + "\n".join(
            f"- {line}" for line in lines
        )
        system = turn.prompt[0]
        turn.prompt[0] = ChatMessage(role="system", content=f"{system.content}{section}")
        return None

    return Plugin(
        name=VOICE_PLUGIN,
        hooks=[(HookPoint.BEFORE_GENERATE, hook)],
        description="style.comment in the prompt of Instagram comment replies",
    )
