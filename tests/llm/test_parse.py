from __future__ import annotations

import pytest

from carrier.llm.parse import (
    REPAIR_PROMPT,
    format_instructions,
    parse_json_list,
    parse_response,
    parse_should_respond,
    render_response,
    repair_prompt,
)

CANONICAL = """<response>
<thought>they greeted me</thought>
<actions>REPLY</actions>
<text>Hello there!</text>
</response>"""


def test_parse_response_canonical_block() -> None:
    parsed = parse_response(CANONICAL)
    assert parsed.ok and parsed.problem is None
    assert parsed.thought == "they greeted me"
    assert parsed.actions == ["REPLY"]
    assert parsed.text == "Hello there!"


def test_parse_response_code_fence_and_chatter_around() -> None:
    raw = f"Sure! Here is my answer:\n```xml\n{CANONICAL}\n```\nLet me know if you need more."
    parsed = parse_response(raw)
    assert parsed.ok
    assert parsed.text == "Hello there!"
    assert parsed.actions == ["REPLY"]


def test_parse_response_missing_wrapper_and_lowercase_actions() -> None:
    raw = "<thought>hmm</thought>\n<actions>reply, follow_room</actions>\n<text>ok then</text>"
    parsed = parse_response(raw)
    assert parsed.ok
    assert parsed.actions == ["REPLY", "FOLLOW_ROOM"]
    assert parsed.text == "ok then"


def test_parse_response_multiline_text_kept() -> None:
    parsed = parse_response("<response><text>line one\nline two</text></response>")
    assert parsed.ok
    assert parsed.text == "line one\nline two"
    assert parsed.actions == ["REPLY"]  # text without actions means a reply


def test_parse_response_ignore_with_empty_text() -> None:
    parsed = parse_response(
        "<response><thought>not for me</thought><actions>IGNORE</actions><text></text></response>"
    )
    assert parsed.ok
    assert parsed.actions == ["IGNORE"]
    assert parsed.text == ""


def test_parse_response_missing_closing_response_tag_is_fine() -> None:
    parsed = parse_response("<response>\n<actions>REPLY</actions>\n<text>hi</text>\n")
    assert parsed.ok
    assert parsed.text == "hi"


@pytest.mark.parametrize(
    "raw",
    [
        '{"thought": "greeting", "text": "Hi!", "actions": ["reply"]}',
        '```json\n{"thought": "greeting", "text": "Hi!", "actions": ["REPLY"]}\n```',
        'Here you go:\n```json\n{"thought": "greeting", "text": "Hi!", "actions": "REPLY"}\n```',
        '{"thought": "greeting", "text": "Hi!", "actions": ["REPLY"]} hope that helps',
    ],
)
def test_parse_response_json_forms(raw: str) -> None:
    parsed = parse_response(raw)
    assert parsed.ok, parsed.problem
    assert parsed.thought == "greeting"
    assert parsed.text == "Hi!"
    assert parsed.actions == ["REPLY"]


def test_parse_response_plain_prose_is_a_reply() -> None:
    parsed = parse_response("Hey! Good to see you again.")
    assert parsed.ok
    assert parsed.text == "Hey! Good to see you again."
    assert parsed.actions == ["REPLY"]
    assert parsed.thought == ""


def test_parse_response_prose_starting_with_brackets_is_prose() -> None:
    parsed = parse_response("[laughs] You got me there.")
    assert parsed.ok
    assert parsed.text == "[laughs] You got me there."


def test_parse_response_fenced_prose() -> None:
    parsed = parse_response("```\nJust some words.\n```")
    assert parsed.ok
    assert parsed.text == "Just some words."


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("<response><thought>x</thought><text>never closed", "<text> was opened but never closed"),
        ("<response><thought>still thinking", "<thought> was opened but never closed"),
        ('{"thought": "x", "text": "unterminated', "invalid"),
        ('```json\n{"text": oops}\n```', "invalid"),
        ('{"foo": 1}', 'no "text" or "actions"'),
        ("<response>just words</response>", "no <text> or <actions>"),
        ("Hello there <resp", "broken XML tag"),
    ],
)
def test_parse_response_malformed_is_not_ok(raw: str, fragment: str) -> None:
    parsed = parse_response(raw)
    assert not parsed.ok
    assert parsed.problem is not None and fragment in parsed.problem


def test_parse_response_unclosed_text_keeps_partial_text() -> None:
    parsed = parse_response("<response><actions>REPLY</actions><text>Half an ans")
    assert not parsed.ok
    assert parsed.text == "Half an ans"
    assert parsed.actions == ["REPLY"]


def test_render_response_round_trips() -> None:
    raw = render_response(thought="t", text="hello", actions=["REPLY", "FOLLOW_ROOM"])
    parsed = parse_response(raw)
    assert (parsed.thought, parsed.text, parsed.actions, parsed.ok) == (
        "t",
        "hello",
        ["REPLY", "FOLLOW_ROOM"],
        True,
    )


def test_format_instructions_show_the_format_and_actions() -> None:
    text = format_instructions(["reply", "ignore"])
    for tag in ("<response>", "<thought>", "<actions>", "<text>", "</response>"):
        assert tag in text
    assert "REPLY, IGNORE" in text
    assert "{" not in format_instructions()


def test_repair_prompt_quotes_the_problem() -> None:
    assert "{problem}" in REPAIR_PROMPT
    text = repair_prompt("<text> was opened but never closed")
    assert "<text> was opened but never closed" in text
    assert "<response>" in text
    assert REPAIR_PROMPT.format(problem="x").startswith(
        "Your previous answer could not be read: x."
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("RESPOND", "RESPOND"),
        ("[IGNORE]", "IGNORE"),
        ("stop", "STOP"),
        ("I think I should respond.", "RESPOND"),
        (
            "<response><thought>I could IGNORE or STOP but they asked me</thought>"
            "<action>RESPOND</action></response>",
            "RESPOND",
        ),
        ("<thought>respond? no.</thought> IGNORE", "IGNORE"),
        ('```json\n{"action": "STOP"}\n```', "STOP"),
        ("<response>maybe</response>", "IGNORE"),
        ("", "IGNORE"),
        ("responding is fun", "IGNORE"),
    ],
)
def test_parse_should_respond(raw: str, expected: str) -> None:
    assert parse_should_respond(raw) == expected


def test_parse_json_list_plain_and_fenced() -> None:
    facts = [{"claim": "likes tea", "type": "preference"}]
    assert parse_json_list('[{"claim": "likes tea", "type": "preference"}]') == facts
    fenced = 'Facts:\n```json\n[{"claim": "likes tea", "type": "preference"}]\n```\nDone.'
    assert parse_json_list(fenced) == facts
    chatter = 'Sure: [{"claim": "likes tea", "type": "preference"}] as requested'
    assert parse_json_list(chatter) == facts


def test_parse_json_list_wrapped_single_and_mixed() -> None:
    assert parse_json_list('{"facts": [{"claim": "a"}]}') == [{"claim": "a"}]
    assert parse_json_list('{"claim": "a"}') == [{"claim": "a"}]
    assert parse_json_list('[{"claim": "a"}, "junk", 3]') == [{"claim": "a"}]


@pytest.mark.parametrize("raw", ["", "no facts here", "[{broken", "```json\n[oops\n```", None])
def test_parse_json_list_garbage_is_empty(raw: str | None) -> None:
    assert parse_json_list(raw) == []
