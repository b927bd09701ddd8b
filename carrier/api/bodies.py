"""Request bodies: size limits, multipart forms, and uploaded files saved under the data dir."""

from __future__ import annotations

import asyncio
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from carrier.api.errors import ApiError, BodyTooLarge, error_json
from carrier.api.schemas import ProblemOut
from carrier.types import new_id

__all__ = [
    "BodyLimitMiddleware",
    "SavedFile",
    "media_type",
    "read_form",
    "read_text",
    "save_upload",
]

_TEXT_TYPES = ("application/json", "application/yaml", "application/x-yaml", "application/xml")
_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,10}$")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\]+")


def media_type(request: Request) -> str:
    """The request's content type without parameters, lower case (``""`` when absent)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


class BodyLimitMiddleware:
    """413 for bodies over their limit: multipart (uploads) up to ``max_upload``, anything else
    up to ``max_json``. A declared Content-Length is checked before the app runs; a streamed
    body is counted as it arrives."""

    def __init__(self, app: ASGIApp, *, max_json: int, max_upload: int) -> None:
        self.app, self.max_json, self.max_upload = app, max_json, max_upload

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        ctype = headers.get(b"content-type", b"").decode("latin-1").lower()
        if ctype.startswith("multipart/"):
            error = BodyTooLarge(self.max_upload, "upload", "CARRIER_MAX_UPLOAD_BYTES")
            limit = self.max_upload
        else:
            error = BodyTooLarge(self.max_json, "request body", "CARRIER_MAX_JSON_BYTES")
            limit = self.max_json
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            response = error_json(413, "content_too_large", str(error.detail))
            await response(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise error
            return message

        await self.app(scope, limited, send)


async def read_form(request: Request) -> FormData:
    """The multipart form (at most 4 files and 20 fields); a malformed one is a 400."""
    try:
        return await request.form(max_files=4, max_fields=20)
    except ApiError:
        raise
    except Exception as exc:
        if getattr(exc, "status_code", None) == 413:
            raise
        raise ApiError(400, "bad_request", f"malformed multipart body: {exc}") from None


@dataclass(frozen=True, slots=True)
class SavedFile:
    id: str
    path: Path
    file_name: str
    """The name the client gave, cleaned up for display (never used as a path)."""
    content_type: str | None
    size: int


def clean_name(name: str | None) -> str:
    base = _UNSAFE.sub("_", (name or "").replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    return base[:200] or "upload"


async def save_upload(upload: UploadFile, folder: Path) -> SavedFile:
    """Save an uploaded file under ``folder`` with a fresh, safe name (``<id><suffix>``)."""
    file_id = new_id()
    display = clean_name(upload.filename)
    suffix = Path(display).suffix
    path = folder / (file_id + (suffix.lower() if _SUFFIX.match(suffix) else ""))
    await asyncio.to_thread(_copy, upload.file, path)
    return SavedFile(
        id=file_id,
        path=path,
        file_name=display,
        content_type=upload.content_type,
        size=path.stat().st_size,
    )


def _copy(source: BinaryIO, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    source.seek(0)
    with path.open("xb") as out:
        shutil.copyfileobj(source, out, 1 << 16)


def is_text(content_type: str | None) -> bool:
    kind = (content_type or "").split(";")[0].strip().lower()
    return kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith("+json")


def read_text(saved: SavedFile, cap: int) -> str | None:
    """The text of a text file, up to ``cap`` characters (``None`` for other files)."""
    if not is_text(saved.content_type) or cap <= 0:
        return None
    with saved.path.open("rb") as f:
        raw = f.read(cap * 4)
    return raw.decode("utf-8", errors="replace")[:cap]


def form_text(form: FormData, name: str, *, max_length: int) -> str | None:
    """A text field of a form; a file where text is expected, or text too long, is a 422."""
    value = form.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(
            422,
            "invalid_request",
            f"{name} must be a text field, not a file",
            problems=[ProblemOut(path=name, message="expected text, got a file")],
        )
    if len(value) > max_length:
        raise ApiError(
            422,
            "invalid_request",
            f"{name} is longer than {max_length} characters",
            problems=[ProblemOut(path=name, message=f"at most {max_length} characters")],
        )
    return value


def form_file(form: FormData, name: str) -> UploadFile | None:
    value = form.get(name)
    if value is None or isinstance(value, UploadFile):
        return value
    raise ApiError(
        422,
        "invalid_request",
        f"{name} must be a file upload",
        problems=[ProblemOut(path=name, message="expected a file, got a text field")],
    )
