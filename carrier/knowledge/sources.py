"""Where knowledge comes from: a character's ``knowledge`` list or paths given on the command line,
resolved into :class:`SourceRef` (what to read) and read into :class:`Document` (text and title).

Source ids name documents in the index: a file listed by a character is named by its path relative
to the character file (``docs/guide.md``, as written there), a file added from the command line by
its absolute path, and a knowledge string by ``inline:`` and the start of its sha256.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal, NamedTuple

from carrier.character.parts import KnowledgeDirectory
from carrier.errors import CharacterError, Problem, UserError
from carrier.install import install_hint

__all__ = [
    "SUPPORTED_SUFFIXES",
    "Document",
    "Found",
    "KnowledgeError",
    "Origin",
    "SourceRef",
    "character_sources",
    "path_sources",
    "read_document",
    "read_source",
]

log = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".txt", ".md", ".pdf")
_SUPPORTED_WORDS = ".txt, .md and .pdf"
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_INSTALL_PYPDF = install_hint("pypdf")

Origin = Literal["character", "cli"]
"""Who manages a document: the character file (``sync_knowledge``) or the user (``carrier
knowledge add/remove``)."""


class KnowledgeError(UserError):
    """Knowledge paths given on the command line are missing or of a type that cannot be read."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True, slots=True)
class SourceRef:
    """One document to ingest, not yet read: a file, or a knowledge string."""

    source: str
    """The document's id in the index."""
    origin: Origin
    shared: bool = False
    path: Path | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Document:
    """A document read: its text, a title for prompts and listings, and the sha256 of its bytes."""

    source: str
    title: str
    text: str
    hash: str


class Found(NamedTuple):
    """What a list of knowledge entries or paths names (blocking to find: run it in a thread)."""

    refs: list[SourceRef]
    skipped: list[str]
    """Files in the folders that are not of a supported type."""
    folders: list[str]
    """Source ids of the folders (documents under them are named ``<folder>/<relative path>``)."""


def character_sources(character: Any, *, base_dir: Path | None = None) -> Found:
    """The documents a character lists, and the files skipped in its directories (not of a
    supported type). Relative paths are relative to ``base_dir``, by default the folder of the
    character file. Every missing or unreadable path is reported at once, in a
    :class:`~carrier.errors.CharacterError` naming the character file."""
    if base_dir is None and getattr(character, "source", None):
        base_dir = Path(character.source).parent
    refs: list[SourceRef] = []
    skipped: list[str] = []
    folders: list[str] = []
    problems: list[Problem] = []
    for i, item in enumerate(getattr(character, "knowledge", None) or []):
        if isinstance(item, str):
            if item.strip():
                digest = hashlib.sha256(item.encode("utf-8")).hexdigest()
                refs.append(
                    SourceRef(source=f"inline:{digest[:16]}", origin="character", text=item)
                )
            continue
        is_dir = isinstance(item, KnowledgeDirectory)
        field = f"knowledge.{i}.{'directory' if is_dir else 'path'}"
        written = str(item.directory if is_dir else item.path)
        if not Path(written).is_absolute() and base_dir is None:
            problems.append(
                Problem(
                    field,
                    f"{written!r} is relative, but the character was not loaded from a file; "
                    "use an absolute path",
                )
            )
            continue
        name = _normalize(written)
        full = Path(name) if Path(name).is_absolute() else (base_dir or Path()) / name
        if not full.exists():
            problems.append(
                Problem(
                    field,
                    f"{written!r} not found (looked for {full.resolve()}); "
                    "paths are relative to the character file",
                )
            )
        elif full.is_dir():
            found, ignored = _walk(full, name)
            refs += [SourceRef(s, "character", item.shared, path=p) for s, p in found]
            skipped += ignored
            folders.append(name)
        elif is_dir:
            problems.append(
                Problem(
                    field, f"{written!r} is a file, not a directory; list it as path: {written}"
                )
            )
        elif full.suffix.lower() not in SUPPORTED_SUFFIXES:
            problems.append(Problem(field, f"cannot read {written!r}: {_unsupported(full)}"))
        else:
            refs.append(SourceRef(name, "character", item.shared, path=full))
    if problems:
        raise CharacterError(getattr(character, "source", None), problems)
    return Found(_dedupe(refs), skipped, folders)


def path_sources(paths: Iterable[str | Path], *, shared: bool = False) -> Found:
    """Documents from files and folders given by the user (named by absolute path), and the files
    skipped in those folders. Every missing or unsupported path is reported at once, in a
    :class:`KnowledgeError`."""
    refs: list[SourceRef] = []
    skipped: list[str] = []
    folders: list[str] = []
    problems: list[str] = []
    for given in paths:
        full = Path(os.path.abspath(given))
        name = full.as_posix()
        if not full.exists():
            problems.append(f"{given}: not found (looked for {full})")
        elif full.is_dir():
            found, ignored = _walk(full, name)
            refs += [SourceRef(s, "cli", shared, path=p) for s, p in found]
            skipped += ignored
            folders.append(name)
        elif full.suffix.lower() not in SUPPORTED_SUFFIXES:
            problems.append(f"{given}: cannot read it: {_unsupported(full)}")
        else:
            refs.append(SourceRef(name, "cli", shared, path=full))
    if problems:
        raise KnowledgeError(problems)
    return Found(_dedupe(refs), skipped, folders)


def read_source(ref: SourceRef) -> tuple[bytes, str]:
    """The document's raw bytes and their sha256 (blocking: run it in a thread)."""
    data = ref.text.encode("utf-8") if ref.text is not None else _path(ref).read_bytes()
    return data, hashlib.sha256(data).hexdigest()


def read_document(ref: SourceRef, data: bytes, digest: str) -> Document:
    """Extract the text and title of a document from its bytes (blocking: run it in a thread).

    Raises ``ValueError`` (or the PDF reader's own error) for a file that cannot be decoded.
    """
    if ref.text is not None:
        return Document(ref.source, _inline_title(ref.text), ref.text, digest)
    path = _path(ref)
    if path.suffix.lower() == ".pdf":
        text, title = _read_pdf(data)
        return Document(ref.source, title or path.name, text, digest)
    text = data.decode("utf-8-sig", errors="replace")
    heading = _HEADING.search(text) if path.suffix.lower() == ".md" else None
    return Document(ref.source, heading.group(1) if heading else path.name, text, digest)


# -- helpers ---------------------------------------------------------------------------------------
def _path(ref: SourceRef) -> Path:
    if ref.path is None:
        raise ValueError(f"knowledge source {ref.source!r} has neither a path nor a text")
    return ref.path


def _normalize(written: str) -> str:
    """A path as written in a character file, made canonical: ``./docs//a.md`` → ``docs/a.md``."""
    return PurePosixPath(os.path.normpath(written.replace("\\", "/"))).as_posix()


def _unsupported(path: Path) -> str:
    kind = f"{path.suffix} files" if path.suffix else "files without a suffix"
    return f"{kind} are not supported (knowledge can be {_SUPPORTED_WORDS})"


def _walk(folder: Path, name: str) -> tuple[list[tuple[str, Path]], list[str]]:
    """Supported files under ``folder`` (recursively, sorted, hidden entries left out) as
    ``(source id, path)``, and the source ids of the unsupported files left out."""
    found: list[tuple[str, Path]] = []
    ignored: list[str] = []
    for path in _files(folder):
        source = f"{name}/{path.relative_to(folder).as_posix()}"
        if path.suffix.lower() in SUPPORTED_SUFFIXES:
            found.append((source, path))
        else:
            ignored.append(source)
    return found, ignored


def _files(folder: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for file in sorted(files):
            if not file.startswith("."):
                yield Path(root) / file


def _dedupe(refs: list[SourceRef]) -> list[SourceRef]:
    """One ref per source id, in first-seen order; listed twice, a document is shared if either
    listing says so."""
    by_source: dict[str, SourceRef] = {}
    for ref in refs:
        seen = by_source.get(ref.source)
        if seen is None:
            by_source[ref.source] = ref
        elif ref.shared and not seen.shared:
            by_source[ref.source] = SourceRef(
                seen.source, seen.origin, True, path=seen.path, text=seen.text
            )
    return list(by_source.values())


def _inline_title(text: str, words: int = 8) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def _read_pdf(data: bytes) -> tuple[str, str | None]:
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise ValueError(f"reading PDF files needs pypdf; run `{_INSTALL_PYPDF}`") from exc
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise ValueError("the PDF is encrypted with a password")
    pages = [(page.extract_text() or "").strip() for page in reader.pages]
    title = reader.metadata.title if reader.metadata is not None else None
    return "\n\n".join(p for p in pages if p), (str(title).strip() or None) if title else None
