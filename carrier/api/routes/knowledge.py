"""``/agents/{agent_id}/knowledge``: an agent's documents, uploads, removal and re-sync.

The documents are those of the agent's index (the setting ``knowledge:<agent_id>``, see
:mod:`carrier.knowledge.index`): listed by its character, added with ``carrier knowledge add``,
or uploaded here. An upload is kept as ``<data_dir>/knowledge/<agent_id>/<file name>`` (the
same name again replaces it) and ingested at once, as ``carrier knowledge add`` would; removing
an uploaded document deletes its file too. ``POST .../knowledge/sync`` brings the index in line
with the character's list and the upload folder (changed files read again, vanished ones
forgotten).

The admin token may do everything; an agent's token may list its documents.
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from carrier.api.auth import Principal, admin_only, agent_access
from carrier.api.bodies import clean_name, form_file, media_type, read_form
from carrier.api.errors import ApiError, error_responses
from carrier.api.schemas import ProblemOut
from carrier.api.state import ApiState, api_state
from carrier.errors import UserError
from carrier.knowledge import (
    SUPPORTED_SUFFIXES,
    KnowledgeDocument,
    KnowledgeError,
    KnowledgeReport,
    add_knowledge,
    list_knowledge,
    remove_knowledge,
    sync_knowledge,
)

__all__ = ["MAX_DOCUMENT_BYTES", "KnowledgeDocumentOut", "KnowledgeListOut", "router"]

router = APIRouter(tags=["knowledge"], responses=error_responses(401, 403, 429))

State = Annotated[ApiState, Depends(api_state)]
Admin = Annotated[Principal, Depends(admin_only)]
Reader = Annotated[Principal, Depends(agent_access)]

MAX_DOCUMENT_BYTES = 5_000_000
"""The largest document an upload may carry: a long PDF; more is better split, or added on the
host with ``carrier knowledge add``."""

_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                }
            }
        },
    }
}

SyncState = Literal["synced", "stale", "empty", "missing"]


class KnowledgeDocumentOut(BaseModel):
    """A document the agent knows."""

    source: str
    title: str
    chunks: int
    words: int
    origin: str
    """``character`` (its character lists it), ``cli`` (added by hand), ``upload`` (here)."""
    updated_at: datetime
    state: SyncState
    """``synced``; ``stale`` (embedded by another model than the one serving now: a re-sync
    embeds it again); ``empty`` (no text: a scanned PDF needs OCR); ``missing`` (its uploaded
    file is gone: a re-sync forgets it)."""


class KnowledgeListOut(BaseModel):
    agent_id: str
    documents: list[KnowledgeDocumentOut]
    chunks: int
    embedding_model: str
    max_bytes: int
    suffixes: list[str]


class KnowledgeReportOut(BaseModel):
    """What an upload, removal or re-sync did (source ids), and chunk counts."""

    added: list[str] = []
    updated: list[str] = []
    removed: list[str] = []
    unchanged: list[str] = []
    failed: dict[str, str] = {}
    empty: list[str] = []
    chunks_embedded: int = 0
    error: str | None = None
    summary: str = ""

    @classmethod
    def of(cls, report: KnowledgeReport) -> KnowledgeReportOut:
        return cls(
            added=report.added,
            updated=report.updated,
            removed=report.removed,
            unchanged=report.unchanged,
            failed=report.failed,
            empty=report.empty,
            chunks_embedded=report.chunks_embedded,
            error=report.error,
            summary=report.summary(),
        )


def _folder(state: ApiState, agent_id: str) -> Path:
    return (Path(state.settings.data_dir) / "knowledge" / agent_id).resolve()


def _out(doc: KnowledgeDocument, folder: Path, model: str) -> KnowledgeDocumentOut:
    uploaded = doc.source.startswith(f"{folder}/")
    state: SyncState = "synced"
    if uploaded and not Path(doc.source).is_file():
        state = "missing"
    elif doc.chunks == 0:
        state = "empty"
    elif doc.embedding_model and doc.embedding_model != model:
        state = "stale"
    return KnowledgeDocumentOut(
        source=doc.source,
        title=doc.title,
        chunks=doc.chunks,
        words=doc.words,
        origin="upload" if uploaded else doc.origin,
        updated_at=doc.updated_at,
        state=state,
    )


@router.get(
    "/agents/{agent_id}/knowledge",
    response_model=KnowledgeListOut,
    summary="List an agent's knowledge documents",
    responses=error_responses(404, 422),
)
async def read_knowledge(agent_id: str, state: State, _: Reader) -> KnowledgeListOut:
    """Each document with its chunk count and sync state, sorted by source."""
    await state.manager.get(agent_id)
    folder = _folder(state, agent_id)
    model = state.manager.embedder.model_id
    docs = [_out(d, folder, model) for d in await list_knowledge(state.manager.store, agent_id)]
    return KnowledgeListOut(
        agent_id=agent_id,
        documents=docs,
        chunks=sum(d.chunks for d in docs),
        embedding_model=model,
        max_bytes=MAX_DOCUMENT_BYTES,
        suffixes=list(SUPPORTED_SUFFIXES),
    )


def _refused(path: str, message: str, status: int = 422) -> ApiError:
    return ApiError(
        status, "invalid_document", message, problems=[ProblemOut(path=path, message=message)]
    )


@router.post(
    "/agents/{agent_id}/knowledge",
    status_code=201,
    response_model=KnowledgeReportOut,
    summary="Upload a knowledge document (multipart `file`)",
    responses=error_responses(400, 404, 413, 415, 422),
    openapi_extra=_UPLOAD_BODY,
)
async def upload_knowledge(
    agent_id: str, request: Request, state: State, _: Admin
) -> KnowledgeReportOut:
    """A ``.txt``, ``.md`` or ``.pdf`` file of at most 5 MB, ingested at once; a file of the
    same name replaces the one uploaded before."""
    await state.manager.get(agent_id)
    if media_type(request) != "multipart/form-data":
        raise ApiError(415, "unsupported_media_type", "send multipart/form-data with a `file`")
    upload = form_file(await read_form(request), "file")
    if upload is None:
        raise _refused("file", "required file is missing: send the document as `file`")
    name = clean_name(upload.filename)
    if Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
        raise _refused(
            "file",
            f"{name!r} is not a document Carrier reads: upload a "
            f"{', '.join(SUPPORTED_SUFFIXES)} file (convert other formats to one of them)",
        )
    data = await upload.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise _refused(
            "file",
            f"{name!r} is over {MAX_DOCUMENT_BYTES // 1_000_000} MB: split it, or add it on the "
            "host with `carrier knowledge add`",
            413,
        )
    folder = _folder(state, agent_id)
    path = folder / name
    await asyncio.to_thread(_write, path, data)
    try:
        report = await add_knowledge(
            state.manager.store, state.manager.embedder, agent_id=agent_id, paths=[path]
        )
    except KnowledgeError as exc:
        await asyncio.to_thread(path.unlink, True)
        raise _refused("file", str(exc)) from None
    return KnowledgeReportOut.of(report)


def _write(path: Path, data: bytes) -> None:
    """Written beside, then moved into place: a reader never sees half a document."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.part")
    part.write_bytes(data)
    os.replace(part, path)


@router.delete(
    "/agents/{agent_id}/knowledge",
    response_model=KnowledgeReportOut,
    summary="Forget a knowledge document",
    responses=error_responses(404, 422),
)
async def delete_knowledge(
    agent_id: str,
    state: State,
    _: Admin,
    source: Annotated[str, Query(min_length=1, max_length=4096, description="Its source id.")],
) -> KnowledgeReportOut:
    """Its chunks are deleted; an uploaded document's file too. A document the character lists
    comes back at the next sync: remove it from the character's ``knowledge`` instead."""
    await state.manager.get(agent_id)
    gone = await remove_knowledge(state.manager.store, agent_id, source)
    if not gone:
        raise ApiError(404, "document_not_found", f"agent {agent_id!r} knows no {source!r}")
    folder = _folder(state, agent_id)
    for doc in gone:
        if doc.source.startswith(f"{folder}/"):
            await asyncio.to_thread(Path(doc.source).unlink, True)
    return KnowledgeReportOut(
        removed=[d.source for d in gone], summary=f"{len(gone)} document(s) forgotten"
    )


@router.post(
    "/agents/{agent_id}/knowledge/sync",
    response_model=KnowledgeReportOut,
    summary="Re-sync an agent's knowledge",
    responses=error_responses(404, 422),
)
async def resync_knowledge(agent_id: str, state: State, _: Admin) -> KnowledgeReportOut:
    """The character's list and the upload folder read again: new and changed documents
    ingested, those gone forgotten. A mistake in the character's list is in ``error``."""
    await state.manager.get(agent_id)
    character = await state.manager.character(agent_id)
    store, embedder = state.manager.store, state.manager.embedder
    try:
        report = await sync_knowledge(store, embedder, agent_id=agent_id, character=character)
    except UserError as exc:  # a path the character lists is missing: say which
        report = KnowledgeReport(error=str(exc))
    folder = _folder(state, agent_id)
    if await asyncio.to_thread(folder.is_dir):
        uploads = await add_knowledge(store, embedder, agent_id=agent_id, paths=[folder])
        for field in ("added", "updated", "removed", "unchanged", "empty"):
            getattr(report, field).extend(getattr(uploads, field))
        report.failed.update(uploads.failed)
        report.chunks_embedded += uploads.chunks_embedded
    return KnowledgeReportOut.of(report)
