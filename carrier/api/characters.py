"""Reading a character from a request: JSON, YAML, or an uploaded file (JSON, YAML, card PNG)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from starlette.datastructures import UploadFile
from starlette.requests import Request

from carrier.api.bodies import clean_name, form_file, media_type, read_form
from carrier.api.errors import ApiError
from carrier.api.schemas import ProblemOut
from carrier.character import Character, load_character_text, parse_character
from carrier.character.lint import CharacterWarning, lint_yaml
from carrier.character.png import PngCardError, card_from_png
from carrier.errors import CharacterError, Problem

__all__ = [
    "CHARACTER_BODY",
    "character_from_request",
    "source_warnings",
]

_YAML = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
_CHARACTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An ElizaOS character (v0.1.x or v1.x, camelCase keys) or a Character Card.",
    "properties": {"name": {"type": "string", "minLength": 1}},
    "required": ["name"],
    "additionalProperties": True,
}
CHARACTER_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "The character as JSON, as YAML (Content-Type: application/yaml), or "
        "as an uploaded file (`file`: .json, .yaml, .yml or a Character Card .png).",
        "content": {
            "application/json": {"schema": _CHARACTER_SCHEMA},
            "application/yaml": {"schema": _CHARACTER_SCHEMA},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                }
            },
        },
    }
}


async def character_from_request(request: Request) -> Character:
    """The character in the body; :class:`CharacterError` (422) lists every problem with its
    field path (and the file name, for uploads); 415 for other content types."""
    kind = media_type(request)
    if kind == "multipart/form-data":
        form = await read_form(request)
        upload = form_file(form, "file")
        if upload is None:
            raise ApiError(
                422,
                "invalid_request",
                "the form has no `file` field with the character file",
                problems=[ProblemOut(path="file", message="required file is missing")],
            )
        return await _from_upload(upload)
    body = await request.body()
    if kind == "application/json" or kind.endswith("+json"):
        return await asyncio.to_thread(load_character_text, _text(body, None), fmt="json")
    if kind in _YAML:
        return await asyncio.to_thread(load_character_text, _text(body, None), fmt="yaml")
    raise ApiError(
        415,
        "unsupported_media_type",
        f"cannot read a character from {kind or 'a body without Content-Type'}; send "
        "application/json, application/yaml, or multipart/form-data with a `file`",
    )


async def source_warnings(request: Request) -> list[CharacterWarning]:
    """The warnings only a YAML body's text can show (values cut short by a ``#`` read as a
    comment); none for other bodies, or text the parser will refuse anyway."""
    if media_type(request) not in _YAML:
        return []
    try:
        text = (await request.body()).decode("utf-8-sig")
    except UnicodeDecodeError:
        return []
    return await asyncio.to_thread(lint_yaml, text)


async def _from_upload(upload: UploadFile) -> Character:
    name = clean_name(upload.filename)
    raw = await upload.read()
    # Decoding a card (inflating its text, parsing and checking the character) is CPU work on
    # a stranger's bytes: done in a thread, so one hostile upload cannot stall other requests.
    return await asyncio.to_thread(_parse_upload, raw, name)


def _parse_upload(raw: bytes, name: str) -> Character:
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if suffix == "png" or raw.startswith(b"\x89PNG"):
        try:
            return parse_character(card_from_png(raw), source=name)
        except PngCardError as exc:
            raise CharacterError(name, [exc.problem]) from None
    fmt: Literal["json", "yaml"] = (
        "json" if suffix == "json" or raw.lstrip()[:1] in (b"{", b"[") else "yaml"
    )
    return load_character_text(_text(raw, name), fmt=fmt, source=name)


def _text(raw: bytes, source: str | None) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CharacterError(source, [Problem("", f"not UTF-8 text (byte {exc.start})")]) from None
