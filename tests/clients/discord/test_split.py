"""The reply splitter: parts under the limit, natural boundaries, code fences kept valid."""

from __future__ import annotations

import random
import re

import pytest

from clients.discord.split import DISCORD_LIMIT, split_message

FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)


def fences_balanced(part: str) -> bool:
    return len(FENCE.findall(part)) % 2 == 0


def long_answer() -> str:
    intro = " ".join(
        f"Sentence number {i} explains one more detail of the jam rules." for i in range(25)
    )
    code = "\n".join(
        f"    velocity_{i} = clamp(velocity_{i - 1} * 0.98, -MAX, MAX)  # step {i}"
        for i in range(1, 45)
    )
    outro = "\n\n".join(
        f"Paragraph {i}: ship small, ship often, and post it in #showcase." for i in range(12)
    )
    return f"{intro}\n\n```python\ndef physics_step():\n{code}\n```\n\n{outro}"


def test_split_short_text_is_one_part() -> None:
    assert split_message("hello") == ["hello"]
    assert split_message("x" * DISCORD_LIMIT) == ["x" * DISCORD_LIMIT]


def test_split_whitespace_only_gives_nothing() -> None:
    assert split_message("") == []
    assert split_message(" \n\n ") == []


def test_split_4500_character_answer_with_code_block() -> None:
    text = long_answer()
    assert 4300 < len(text) < 6000
    parts = split_message(text)
    assert len(parts) >= 3
    assert all(len(p) < DISCORD_LIMIT for p in parts)
    assert all(fences_balanced(p) for p in parts)
    # The code block was cut: the part that continues it reopens the fence with its language.
    continued = [p for p in parts[1:] if p.startswith("```python\n")]
    assert continued, parts
    # Nothing is lost: every code line and every sentence is in exactly one part.
    joined = "\n".join(parts)
    for i in range(1, 45):
        assert joined.count(f"velocity_{i} = clamp") == 1
    for i in range(25):
        assert joined.count(f"Sentence number {i} ") == 1


def test_split_prefers_paragraph_breaks() -> None:
    paragraphs = [f"{i} " + "word " * 150 for i in range(6)]  # ~750 characters each
    parts = split_message("\n\n".join(p.strip() for p in paragraphs), 2000)
    for part in parts:
        assert part.startswith(tuple(str(i) for i in range(6)))
        assert part.endswith("word")


def test_split_falls_back_to_sentences_then_spaces_then_hard_cuts() -> None:
    sentences = " ".join(f"This is sentence {i}." for i in range(300))
    parts = split_message(sentences, 500)
    assert all(len(p) <= 500 and p.endswith(".") for p in parts)
    words = " ".join(["lorem"] * 400)
    assert all(p.endswith("lorem") for p in split_message(words, 300))
    blob = "x" * 1000
    parts = split_message(blob, 300)
    assert "".join(parts) == blob and all(len(p) <= 300 for p in parts)


def test_split_keeps_fence_language_and_tilde_fences() -> None:
    code = "\n".join(f"print({i})" for i in range(400))
    parts = split_message(f"~~~py\n{code}\n~~~", 500)
    assert len(parts) > 3
    assert all(p.startswith("~~~py\n") and p.endswith("~~~") for p in parts)


def test_split_inline_triple_backticks_are_not_fences() -> None:
    text = "use ```x``` inline. " * 200
    parts = split_message(text, 400)
    assert all(not p.startswith("```") for p in parts[1:])


def test_split_rejects_tiny_limits() -> None:
    with pytest.raises(ValueError, match="at least 64"):
        split_message("hello", 10)


@pytest.mark.parametrize("seed", range(25))
def test_split_random_markdown_always_valid(seed: int) -> None:
    rng = random.Random(seed)
    blocks = []
    for _ in range(rng.randint(5, 30)):
        if rng.random() < 0.3:
            lang = rng.choice(["", "python", "js", "gdscript"])
            lines = [
                ("    " * rng.randint(0, 3)) + "x" * rng.randint(0, 120)
                for _ in range(rng.randint(1, 60))
            ]
            blocks.append(f"```{lang}\n" + "\n".join(lines) + "\n```")
        else:
            words = [
                rng.choice(["ship", "it.", "jam", "pixel!", "art?", "a" * rng.randint(1, 40)])
                for _ in range(rng.randint(5, 200))
            ]
            blocks.append(" ".join(words))
    text = "\n\n".join(blocks)
    limit = rng.choice([200, 500, 1900, 2000])
    parts = split_message(text, limit)
    assert all(0 < len(p) <= limit for p in parts)
    assert all(fences_balanced(p) for p in parts)
    # Apart from fence lines (added to close and reopen), the text survives, in order.
    assert content(parts) == content([text])


def content(texts: list[str]) -> str:
    lines = [line for t in texts for line in t.splitlines() if not FENCE.match(line)]
    return re.sub(r"\s+", "", "".join(lines))
