"""Text helpers for Character Card import: placeholders, sentences, traits, example dialogue."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["fill", "greeting_prompt", "parse_mes_example", "sentences", "traits"]

_CHAR = re.compile(r"\{\{char\}\}|<BOT>", re.IGNORECASE)
_USER = re.compile(r"\{\{user\}\}|<USER>", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=[\"'“(\[{]?[A-Z0-9{])")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_TRAIT_SPLIT = re.compile(r"[,;/\n]|\band\b|\bor\b", re.IGNORECASE)
_START = re.compile(r"<START>", re.IGNORECASE)
_GREETING_PROMPTS = ("Hello!", "Hi there!", "Hey!", "Good to see you!", "Hi!")


def fill(text: str, char: str) -> str:
    """``{{char}}``/``<BOT>`` → the name; ``{{user}}``/``<USER>`` → ``{{user1}}``."""
    return _USER.sub("{{user1}}", _CHAR.sub(lambda _: char, text))


def sentences(text: str) -> list[str]:
    """``text`` cut into lines, list bullets removed, and long lines into sentences."""
    out: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if line:
            out += [s.strip() for s in _SENTENCE_END.split(line) if s.strip()]
    return out


def traits(personality: str) -> list[str]:
    """The short traits of a personality line (``"witty, loyal and brave"`` → three); longer
    phrases (prose) are left to ``style.all``."""
    parts = (p.strip(" .!\t\"'") for p in _TRAIT_SPLIT.split(personality))
    return list(dict.fromkeys(p for p in parts if p and len(p) <= 40 and len(p.split()) <= 4))


def greeting_prompt(index: int) -> str:
    """The user line that precedes greeting number ``index`` in the imported examples."""
    return _GREETING_PROMPTS[index % len(_GREETING_PROMPTS)]


def parse_mes_example(
    text: str, *, name: str, nickname: str | None = None
) -> list[list[dict[str, Any]]]:
    """Example dialogue (blocks separated by ``<START>``, lines ``{{user}}: ...`` /
    ``{{char}}: ...``) as ElizaOS message example conversations. Lines without a speaker
    continue the previous message. ``{{char}}`` in the text becomes the nickname, if any."""
    char = nickname or name
    names = [re.escape(n) for n in dict.fromkeys((name, char)) if n]
    speaker = re.compile(
        r"^\s*(?P<who>\{\{user\}\}|\{\{char\}\}|<USER>|<BOT>"
        + "".join(f"|{n}" for n in names)
        + r")\s*:\s?(?P<text>.*)$",
        re.IGNORECASE,
    )
    conversations = []
    for block in _START.split(text):
        messages: list[list[str]] = []
        for line in block.splitlines():
            match = speaker.match(line)
            if match:
                who = match["who"].lower()
                user = who in ("{{user}}", "<user>")
                messages.append(["{{user1}}" if user else name, match["text"]])
            elif messages and line.strip():
                messages[-1][1] += "\n" + line.strip()
        conversation = [
            {"name": who, "content": {"text": fill(said, char).strip()}}
            for who, said in messages
            if said.strip()
        ]
        if conversation:
            conversations.append(conversation)
    return conversations
