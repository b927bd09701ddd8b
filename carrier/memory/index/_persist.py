"""Saved ANN graphs: a set's graph written beside the database, reloaded and patched on start.

A save is the graph and a manifest of the memory each of its rows held (id and a fingerprint of
the vector), both under names of that save's own, the manifest last: processes that share the
directory never read another's half-written one. It happens in a worker thread; the graph is not
changed meanwhile (an ANN graph is not safe to change while it is read): rows that change are
held, searched exactly beside it, and added once the file is written.

A restore patches the newest save to the rows as loaded, whatever their order: rows whose memory
still has the same vector are renamed to that memory's new row, the others removed, and memories
it lacks (written by another process, or after the last save of one that crashed) added; when
fewer than half of the set's rows keep their place it is rebuilt instead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

from carrier.memory.index._entry import BUILD_CHUNK, Entry, Key, add, apply_rows
from carrier.memory.index.ann import AnnIndex, USearchIndex
from carrier.memory.index.rows import VectorSet

__all__ = ["remove_agent_files", "restore", "save"]

logger = logging.getLogger("carrier.memory.index.manager")

_FORMAT = 3
_MANIFEST = ".rows.npz"
_RENAME_OFFSET = 1 << 40
"""Renamed keys pass through ``key + offset`` (above any row) so no two ever collide."""
_MIN_KEPT = 0.5
"""A saved index is patched when at least this share of the set's rows keep their place in it."""
_EMPTY = -2
"""In :func:`_match`: a saved row that held no memory (not in the graph)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


async def restore(
    entry: Entry,
    vs: VectorSet,
    directory: Path | None,
    *,
    persist_rows: int,
    closed: Callable[[], bool],
) -> tuple[AnnIndex | None, int]:
    """The saved index patched to ``vs`` (see the module docstring) and how many rows were
    removed or added; ``(None, 0)`` when there is none or it keeps too little, or when the set
    is dropped or the index ``closed`` meanwhile."""
    folder = _folder(directory, entry.key)
    if folder is None or len(vs) < persist_rows or not folder.is_dir():
        return None, 0
    saved = await asyncio.to_thread(_latest, folder)
    if saved is None:
        return None, 0
    graph, ids, prints = saved
    old = np.arange(len(ids), dtype=np.int64)
    new, same = await asyncio.to_thread(_match, vs, ids, prints)
    if entry.cancelled or closed():
        return None, 0
    if np.count_nonzero(same) < _MIN_KEPT * len(vs):
        logger.info("the saved vector index in %s fits too few rows; building one", folder)
        return None, 0
    ann = await asyncio.to_thread(USearchIndex.restore, graph, vs.dim)
    if ann is None or entry.cancelled or closed():
        return None, 0
    stale = old[~same & (new != _EMPTY)]
    await asyncio.to_thread(_patch, ann, stale, old[same], new[same])
    later = np.setdiff1d(vs.live_rows(), new[same], assume_unique=True)
    for start in range(0, later.size, BUILD_CHUNK):
        if entry.cancelled or closed():
            return None, 0
        await asyncio.to_thread(add, ann, later[start : start + BUILD_CHUNK], vs.vectors())
    return ann, int(stale.size + later.size)


async def save(entry: Entry, directory: Path | None, *, persist_rows: int) -> None:
    """Write the set's ANN graph (of ``persist_rows`` rows or more) under ``directory``."""
    folder = _folder(directory, entry.key)
    vs, ann = entry.vectors, entry.ann
    if folder is None or vs is None or ann is None or len(vs) < persist_rows:
        return
    entry.apply_pending()  # the manifest lists every row: the graph must hold them
    entry.dirty = False
    entry.saved_at = time.monotonic()
    entry.changed = set()  # held while the thread reads the graph; searched beside it
    path: Path | None = None
    rows = vs.size  # the graph holds these (changes from here on are held)
    ids = vs.ids(rows)
    try:
        path = await asyncio.to_thread(
            _write, ann, folder, ids, lambda: vs.fingerprints(np.arange(rows))
        )
    except asyncio.CancelledError:
        # The thread may still be reading the graph: stop using it rather than change it.
        entry.ann, entry.changed = None, None
        raise
    except Exception as exc:
        logger.warning("cannot save the vector index in %s: %s", folder, exc)
    held = np.fromiter(entry.changed or (), dtype=np.int64)
    entry.changed = None
    if entry.cancelled:  # the set was dropped (its agent deleted) while the file was written
        if path is not None:
            _discard(path)
        return
    if held.size:
        apply_rows(ann, vs, held)
        entry.dirty = True  # saved again later
        if path is not None and bool((held < rows).any()):
            # A row the save covers changed while it was written: its manifest may describe
            # a vector the graph lacks. Not kept. (Rows appended meanwhile lie past the rows
            # it covers: a start reloads it and adds them.)
            _discard(path)


def remove_agent_files(directory: Path | None, agent_id: str) -> None:
    """Remove the saved indexes of an agent's sets, of every model."""
    if directory is None or not directory.is_dir():
        return
    name = _safe(agent_id)
    for folder in [*directory.glob(f"*/{name}"), *directory.glob(f"*/{name}~*")]:
        shutil.rmtree(folder, ignore_errors=True)
        _remove_old_layout(folder)


def _folder(directory: Path | None, key: Key) -> Path | None:
    """Where a set's saved indexes go: ``<model>-<dim>/<agent>`` for the main set,
    ``<agent>~<kind>`` beside it for a set of one kind (``~`` is never in a safe name)."""
    if directory is None:
        return None
    agent_id, model, dim, shard = key
    name = _safe(agent_id) + (f"~{_safe(shard)}" if shard else "")
    return directory / f"{_safe(model)}-{dim}" / name


def _write(
    ann: AnnIndex, folder: Path, ids: list[str | None], prints_of: Callable[[], np.ndarray]
) -> Path:
    """Save ``ann`` with its manifest (the id and fingerprint of each row), both under names of
    this save's own, the manifest last; older saves of the set are removed. Returns the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    graph, manifest = folder / f"{stamp}.usearch", folder / f"{stamp}{_MANIFEST}"
    tmp = folder / f".{stamp}.tmp"
    try:
        ann.save(tmp)
        tmp.replace(graph)
        packed = "\0".join(memory_id or "" for memory_id in ids).encode()
        with tmp.open("wb") as out:
            np.savez(
                out,
                format=np.int64(_FORMAT),
                rows=np.int64(len(ids)),
                ids=np.frombuffer(packed, dtype=np.uint8),
                fingerprints=prints_of(),
            )
        tmp.replace(manifest)
    finally:
        tmp.unlink(missing_ok=True)
    for old in folder.iterdir():
        if not old.name.startswith((stamp, ".")):
            old.unlink(missing_ok=True)
    _remove_old_layout(folder)
    return manifest


def _latest(folder: Path) -> tuple[Path, list[str], np.ndarray] | None:
    """The newest complete save in ``folder``: its graph, row ids ("" for an empty row) and
    fingerprints; None if there is none (or it cannot be read)."""
    for manifest in sorted(folder.glob(f"*{_MANIFEST}"), reverse=True):
        graph = _graph_of(manifest)
        try:
            with np.load(manifest) as data:
                if int(data["format"]) != _FORMAT or not graph.exists():
                    continue
                rows = int(data["rows"])
                ids = data["ids"].tobytes().decode().split("\0") if rows else []
                prints = np.asarray(data["fingerprints"], dtype=np.float32)
        except (OSError, ValueError, KeyError) as exc:
            logger.warning("cannot read the saved vector index %s: %s", manifest, exc)
            continue
        if len(ids) == rows == prints.shape[0]:
            return graph, ids, prints
    return None


def _match(vs: VectorSet, ids: list[str], prints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each saved row: the row of its memory in ``vs`` (-1: gone, ``_EMPTY``: it held
    none) and whether that row still has the vector it had (same fingerprint)."""
    new = np.empty(len(ids), dtype=np.int64)
    for i, memory_id in enumerate(ids):
        row = vs.row_of(memory_id) if memory_id else _EMPTY
        new[i] = -1 if row is None else row
    same = new >= 0
    same[same] = np.all(vs.fingerprints(new[same]) == prints[same], axis=1)
    return new, same


def _patch(ann: AnnIndex, stale: np.ndarray, keep: np.ndarray, to: np.ndarray) -> None:
    """Remove the ``stale`` keys, then rename ``keep`` to ``to`` (through keys above any row,
    so that a key is never renamed onto one not yet moved)."""
    assert isinstance(ann, USearchIndex)
    ann.remove(stale)
    ann.rename(keep, keep + _RENAME_OFFSET)
    ann.rename(keep + _RENAME_OFFSET, to)


def _discard(manifest: Path) -> None:
    """Remove a save (its manifest first: a graph without one is never read)."""
    manifest.unlink(missing_ok=True)
    _graph_of(manifest).unlink(missing_ok=True)


def _graph_of(manifest: Path) -> Path:
    """The graph file a manifest describes (same name, ``.usearch``)."""
    return manifest.with_name(manifest.name[: -len(_MANIFEST)] + ".usearch")


def _remove_old_layout(folder: Path) -> None:
    """Files of the layout before fingerprinted names (``<agent>.usearch`` and ``.json``)."""
    for suffix in (".usearch", ".json"):
        (folder.parent / f"{folder.name}{suffix}").unlink(missing_ok=True)


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name)[:80] or "_"
