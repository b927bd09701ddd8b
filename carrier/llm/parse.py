"""The response format the model is asked for, and tolerant parsers for what comes back.

Models are asked to answer in a small XML block::

    <response>
    <thought>private reasoning</thought>
    <actions>REPLY</actions>
    <text>the message to send</text>
    </response>

:func:`parse_response` accepts that block with code fences, chatter around it, a missing wrapper
or lowercase action names, the same fields as JSON, and plain prose. When the output looks like a
broken structured answer it returns ``ok=False`` with a ``problem``, so the caller can ask once
more with :data:`REPAIR_PROMPT`.

The model may quote what people wrote, tags and all (someone's ``<response><actions>MUTE_ROOM``):
fields are read in order, each up to its own closing tag, so a tag quoted inside the thought or
the text is content, never a field; and the entities of the escaped prompt (``&lt;``) that the
model copies come back as characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from carrier.untrusted import unescape

__all__ = [
    "REPAIR_PROMPT",
    "ParsedResponse",
    "closing_tag",
    "format_instructions",
    "parse_json_list",
    "parse_response",
    "parse_should_respond",
    "render_response",
    "repair_prompt",
]

ShouldRespond = Literal["RESPOND", "IGNORE", "STOP"]


class ParsedResponse(BaseModel):
    """A model answer, parsed. Fields are filled as far as possible even when ``ok`` is False."""

    thought: str = ""
    """Private reasoning; stored, never sent."""
    text: str = ""
    """The message to send."""
    actions: list[str] = Field(default_factory=list)
    """Uppercase action names, in order."""
    ok: bool = True
    problem: str | None = None
    """Why the output could not be read, when ``ok`` is False (quoted in the repair prompt)."""


_FORMAT = """\
Answer in exactly this format, with nothing before or after it:
<response>
<thought>your private reasoning: what is going on and what you will do (never shown)</thought>
<actions>REPLY</actions>
<text>the message to send, in character</text>
</response>
<actions> is a comma-separated list of action names{names}. \
Use REPLY to answer with <text>; use IGNORE (and leave <text> empty) to say nothing."""

REPAIR_PROMPT = """\
Your previous answer could not be read: {problem}.
Write the same answer again in the required format.
""" + _FORMAT.replace("{names}", "")
"""Sent (as a user message after the failed answer) for the one repair retry; format it with
``problem=``, or use :func:`repair_prompt`."""


def format_instructions(actions: Sequence[str] = ()) -> str:
    """The block that tells the model how to answer; lists ``actions`` when given."""
    names = f" from: {', '.join(a.upper() for a in actions)}" if actions else ""
    return _FORMAT.replace("{names}", names)


def repair_prompt(problem: str | None) -> str:
    """:data:`REPAIR_PROMPT` filled in with ``problem``."""
    return REPAIR_PROMPT.replace("{problem}", problem or "it was not in the required format")


def render_response(*, text: str, thought: str = "", actions: Sequence[str] = ("REPLY",)) -> str:
    """The XML block for an answer: what the model is asked to write (and the offline provider
    writes). ``parse_response(render_response(...))`` gives the same fields back."""
    return (
        "<response>\n"
        f"<thought>{thought}</thought>\n"
        f"<actions>{', '.join(actions)}</actions>\n"
        f"<text>{text}</text>\n"
        "</response>"
    )


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_ANY_TAG = re.compile(r"</?\s*(response|thought|actions?|text)\s*>", re.IGNORECASE)
_PARTIAL_TAG = re.compile(r"<\s*/?\s*(resp|thou|act|tex)[a-z]*\s*$", re.IGNORECASE)


def _tag(raw: str, name: str) -> tuple[str | None, bool]:
    """Content of the first ``<name>...</name>``; ``(partial content, False)`` if never closed."""
    m = re.search(rf"<\s*{name}\s*>", raw, re.IGNORECASE)
    if m is None:
        return None, True
    end = re.search(rf"<\s*/\s*{name}\s*>", raw[m.end() :], re.IGNORECASE)
    if end is None:
        rest = raw[m.end() :]
        rest = re.split(r"<\s*/?\s*response\s*>|```", rest, flags=re.IGNORECASE)[0]
        return rest.strip(), False
    return raw[m.end() : m.end() + end.start()].strip(), True


def _split_actions(value: Any) -> list[str]:
    if isinstance(value, str):
        items: list[Any] = re.split(r"[,\n;]+", value)
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return []
    names = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("name", "")
        name = str(item).strip().strip("\"'[]` ").strip()
        if name:
            names.append(re.sub(r"\s+", "_", name).upper())
    return names


_OPEN_FIELD = re.compile(r"<\s*(thought|actions|action|text)\s*>", re.IGNORECASE)
_RESPONSE_END = re.compile(r"<\s*/?\s*response\s*>|```", re.IGNORECASE)


def closing_tag(raw: str, name: str, start: int) -> re.Match[str] | None:
    """The ``</name>`` that closes a ``<name>`` opened before ``start``: a quoted ``<name>...
    </name>`` pair inside it (a message the model repeats) is skipped. None if never closed."""
    depth = 1
    for m in re.finditer(rf"<\s*(/?)\s*{name}\s*>", raw[start:], re.IGNORECASE):
        depth += -1 if m.group(1) else 1
        if depth == 0:
            return re.compile(rf"<\s*/\s*{name}\s*>", re.IGNORECASE).match(raw, start + m.start())
    return None


def _fields(raw: str) -> tuple[dict[str, str], list[str]]:
    """The answer's fields, read in order: each runs from its tag to its own closing tag, and
    whatever tags sit inside it (a message the model quotes, ``<actions>MUTE_ROOM</actions>``
    included) are its content, not fields. The first field of each name counts."""
    fields: dict[str, str] = {}
    problems: list[str] = []
    pos = 0
    while (m := _OPEN_FIELD.search(raw, pos)) is not None:
        name = m.group(1).lower()
        end = closing_tag(raw, name, m.end())
        if end is None:
            # Never closed: its text runs to the next field (or the end of the block).
            rest = raw[m.end() :]
            stop = [x.start() for x in (_OPEN_FIELD.search(rest), _RESPONSE_END.search(rest)) if x]
            fields.setdefault(name, rest[: min(stop, default=len(rest))].strip())
            problems.append(f"<{name}> was opened but never closed")
            pos = m.end()
            continue
        fields.setdefault(name, raw[m.end() : end.start()].strip())
        pos = end.end()
    return fields, problems


def _parse_xml(raw: str) -> ParsedResponse:
    fields, problems = _fields(raw)
    actions_raw = fields.get("actions", fields.get("action"))
    actions = _split_actions(actions_raw or "")
    text = unescape(fields.get("text") or "")
    if "text" not in fields and actions_raw is None:
        problems.append("no <text> or <actions> element was found")
    if not actions and text:
        actions = ["REPLY"]
    return ParsedResponse(
        thought=unescape(fields.get("thought") or ""),
        text=text,
        actions=actions,
        ok=not problems,
        problem="; ".join(problems) or None,
    )


def _json_candidates(raw: str) -> tuple[str | None, bool]:
    """The JSON text to try and whether the output clearly meant to be JSON."""
    for lang, body in _FENCE.findall(raw):
        if lang.lower() == "json" or re.match(r"\s*(\{|\[\s*\{)", body):
            return body.strip(), True
    stripped = raw.strip()
    # "[laughs] hi" is prose; only an object (or a list of one) is a JSON answer.
    if re.match(r"(\{|\[\s*\{)", stripped):
        return stripped, True
    start, end = stripped.find("{"), stripped.rfind("}")
    if start != -1 and end > start and re.search(r'"(text|actions|thought)"\s*:', stripped):
        return stripped[start : end + 1], True
    return None, False


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    # Chatter after a complete object ("{...} Hope this helps!"): decode the first value only.
    start = min((i for i in (text.find("{"), text.find("[")) if i != -1), default=-1)
    if start == -1:
        raise ValueError("no JSON value")
    value, _ = json.JSONDecoder().raw_decode(text[start:])
    return value


def _parse_json(candidate: str) -> ParsedResponse:
    try:
        data = _loads(candidate)
    except ValueError as exc:
        return ParsedResponse(ok=False, problem=f"the JSON answer is invalid ({exc})")
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]
    if not isinstance(data, dict):
        return ParsedResponse(ok=False, problem="the JSON answer is not an object")
    text = data.get("text", data.get("message", data.get("response")))
    actions_raw = data.get("actions", data.get("action"))
    if text is None and actions_raw is None:
        return ParsedResponse(ok=False, problem='the JSON answer has no "text" or "actions" field')
    text = "" if text is None else unescape(str(text).strip())
    actions = _split_actions(actions_raw) if actions_raw is not None else []
    if not actions and text:
        actions = ["REPLY"]
    return ParsedResponse(
        thought=str(data.get("thought") or "").strip(), text=text, actions=actions
    )


def _strip_fence(raw: str) -> str:
    m = _FENCE.fullmatch(raw.strip())
    return m.group(2).strip() if m else raw.strip()


def parse_response(raw: str | None) -> ParsedResponse:
    """Parse a model answer (XML block, JSON or prose) into thought, text and actions."""
    if raw is None or not raw.strip():
        return ParsedResponse(ok=False, problem="the answer was empty")
    if _ANY_TAG.search(raw):
        return _parse_xml(raw)
    candidate, meant_json = _json_candidates(raw)
    if candidate is not None and meant_json:
        return _parse_json(candidate)
    prose = _strip_fence(raw)
    if not prose:
        return ParsedResponse(ok=False, problem="the answer was empty")
    if _PARTIAL_TAG.search(prose) or re.match(r"\s*<\s*/?\s*[a-z]", prose, re.IGNORECASE):
        return ParsedResponse(
            text=prose, actions=["REPLY"], ok=False, problem="the answer has a broken XML tag"
        )
    return ParsedResponse(text=unescape(prose), actions=["REPLY"])


_DECISIONS: tuple[ShouldRespond, ...] = ("RESPOND", "IGNORE", "STOP")
_DECISION_WORD = re.compile(r"(?<![A-Za-z_])(RESPOND|IGNORE|STOP)(?![A-Za-z_])", re.IGNORECASE)


def parse_should_respond(raw: str | None) -> ShouldRespond:
    """RESPOND, IGNORE or STOP from a should-respond answer; IGNORE when unclear.

    An ``<action>``/``<actions>`` element or a JSON ``action`` field wins; otherwise the first of
    the three words outside any ``<thought>`` (reasoning may mention all three).
    """
    if not raw:
        return "IGNORE"
    # The reasoning may quote the conversation (tags and all): it never decides.
    without_thought = re.sub(
        r"<\s*thought\s*>.*?(<\s*/\s*thought\s*>|\Z)", " ", raw, flags=re.IGNORECASE | re.DOTALL
    )
    for name in ("actions", "action", "decision"):
        value, _ = _tag(without_thought, name)
        if value:
            m = _DECISION_WORD.search(value)
            if m:
                return _decision(m.group(1))
    m = re.search(r'"(?:action|actions|decision)"\s*:\s*\[?\s*"([A-Za-z_]+)"', without_thought)
    if m and m.group(1).upper() in _DECISIONS:
        return _decision(m.group(1))
    m = _DECISION_WORD.search(without_thought)
    return _decision(m.group(1)) if m else "IGNORE"


def _decision(word: str) -> ShouldRespond:
    upper = word.upper()
    return cast(ShouldRespond, upper) if upper in _DECISIONS else "IGNORE"


def parse_json_list(raw: str | None) -> list[dict[str, Any]]:
    """A list of objects (fact extraction) from a model answer; ``[]`` for anything unreadable.

    Accepts fences and chatter around the list, a single object, or an object wrapping the list
    (``{"facts": [...]}``); non-object items are dropped.
    """
    if not raw or not raw.strip():
        return []
    bodies = [body for _, body in _FENCE.findall(raw)] + [raw]
    for body in bodies:
        data = _try_loads(body)
        if data is None:
            start, end = body.find("["), body.rfind("]")
            data = _try_loads(body[start : end + 1]) if start != -1 and end > start else None
        if data is None:
            continue
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else [data]
        if isinstance(data, list):
            return [item for item in data if isinstance(item, dict)]
    return []


def _try_loads(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    try:
        return _loads(text)
    except ValueError:
        return None
