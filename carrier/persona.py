"""A sampled persona: random subsets of bio, lore, examples and style, as ElizaOS does.

Sampling keeps prompts short and varied across turns; the random generator is passed in, so a
seeded runtime (tests) always gets the same sample.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

__all__ = ["example_pairs", "sample_persona", "speaker_of", "text_of"]

BIO_LINES = 5
LORE_LINES = 8
EXAMPLE_CONVERSATIONS = 4
TOPICS = 5
ADJECTIVES = 3


def _pick(rng: random.Random, items: Sequence[str], n: int) -> list[str]:
    items = [i for i in items if i]
    if len(items) <= n:
        return list(items)
    return rng.sample(items, n)


def speaker_of(example: Any) -> str:
    return str(getattr(example, "speaker", None) or getattr(example, "user", None) or "")


def text_of(example: Any) -> str:
    content = getattr(example, "content", None)
    if content is None:
        return ""
    if isinstance(content, dict):
        return str(content.get("text") or "")
    return str(getattr(content, "text", "") or "")


def _is_agent(speaker: str, agent_name: str) -> bool:
    return speaker == agent_name or speaker in ("{{agentName}}", "{{agent}}", "{{char}}")


def format_conversation(
    conversation: Sequence[Any], agent_name: str, user_names: Sequence[str]
) -> str:
    """One example conversation as ``Name: text`` lines, placeholders replaced by sample names."""
    lines = []
    for ex in conversation:
        speaker = speaker_of(ex)
        text = text_of(ex)
        if not text:
            continue
        if _is_agent(speaker, agent_name):
            speaker = agent_name
        elif speaker.startswith("{{"):
            digits = "".join(ch for ch in speaker if ch.isdigit()) or "1"
            speaker = user_names[(int(digits) - 1) % len(user_names)]
        lines.append(f"{speaker}: {text}")
    return "\n".join(lines)


_SAMPLE_USERS = ("Alex", "Sam", "Jordan", "Riley", "Casey", "Morgan")


def sample_persona(character: Any, rng: random.Random) -> dict[str, str]:
    """Template values for the persona sections of a prompt."""
    name = character.name
    style = getattr(character, "style", None)
    style_lines = list(getattr(style, "all", []) or []) + list(getattr(style, "chat", []) or [])
    conversations = list(getattr(character, "message_examples", []) or [])
    chosen = (
        conversations
        if len(conversations) <= EXAMPLE_CONVERSATIONS
        else rng.sample(conversations, EXAMPLE_CONVERSATIONS)
    )
    users = list(_SAMPLE_USERS)
    rng.shuffle(users)
    examples = "\n\n".join(format_conversation(c, name, users) for c in chosen)
    adjectives = _pick(rng, list(getattr(character, "adjectives", []) or []), ADJECTIVES)
    topics = _pick(rng, list(getattr(character, "topics", []) or []), TOPICS)
    return {
        "agentName": name,
        "system": getattr(character, "system", None) or "",
        "bio": "\n".join(_pick(rng, list(character.bio or []), BIO_LINES)),
        "lore": "\n".join(_pick(rng, list(getattr(character, "lore", []) or []), LORE_LINES)),
        "adjectives": f"{name} is {', '.join(adjectives)}." if adjectives else "",
        "topics": f"{name} is interested in {', '.join(topics)}." if topics else "",
        "style": "\n".join(f"- {s}" for s in style_lines),
        "messageExamples": examples,
    }


def example_pairs(character: Any) -> list[tuple[str, str]]:
    """(user text, agent reply) pairs from the character's message examples: each agent line paired
    with the user line right before it. Used by the offline provider."""
    pairs: list[tuple[str, str]] = []
    for conversation in getattr(character, "message_examples", []) or []:
        previous: str | None = None
        for ex in conversation:
            text = text_of(ex)
            if _is_agent(speaker_of(ex), character.name):
                if previous and text:
                    pairs.append((previous, text))
                previous = None
            else:
                previous = text or previous
    return pairs
