"""What an ingest did (:class:`KnowledgeReport`) and how it reports progress while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = ["KnowledgeProgress", "KnowledgeReport", "Phase"]

Phase = Literal["read", "embed"]
"""``read``: documents hashed (and, when new or changed, read and chunked); ``embed``: chunks
embedded and stored."""


class KnowledgeProgress(Protocol):
    """Called with the phase, how many items are done and how many there are in all; first with
    ``done == 0`` (so a progress bar knows its total), then after each document or batch."""

    def __call__(self, phase: Phase, done: int, total: int) -> None: ...


@dataclass
class KnowledgeReport:
    """Documents by what happened to them (source ids), and chunk counts."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    """Changed since the last ingest (or chunked or embedded differently): old chunks replaced."""
    removed: list[str] = field(default_factory=list)
    """No longer listed (or gone from a folder): their chunks were deleted."""
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Documents that could not be read, with the reason; what was known of them is kept."""
    skipped: list[str] = field(default_factory=list)
    """Files in listed folders that are not of a supported type."""
    empty: list[str] = field(default_factory=list)
    """Documents with no text (a scanned PDF needs OCR first)."""
    chunks_embedded: int = 0
    chunks_reused: int = 0
    """Chunks stored without embedding: the same text was stored before (under the old version of
    the document, or by a run that stopped half-way)."""
    chunks_deleted: int = 0
    error: str | None = None
    """Why nothing was done (:func:`sync_character_knowledge` only; the others raise)."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def summary(self) -> str:
        if self.error is not None:
            return f"knowledge not synced: {self.error}"
        parts = [
            f"{len(self.added)} added",
            f"{len(self.updated)} updated",
            f"{len(self.removed)} removed",
            f"{len(self.unchanged)} unchanged",
        ]
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        text = ", ".join(parts) + f" document(s); {self.chunks_embedded} chunk(s) embedded"
        if self.chunks_reused:
            text += f", {self.chunks_reused} reused"
        if self.skipped:
            text += f"; {len(self.skipped)} file(s) of other types skipped"
        return text
