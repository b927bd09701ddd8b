"""The data dir is private: 0700, and what Carrier keeps there 0600.

It holds every conversation (``carrier.db`` and its ``-wal``/``-shm`` files), uploads, saved
vector indexes, the generated secret key and the local admin token, so nobody but the user
running Carrier may read it. The commands that write there call :func:`private_data_dir` first:
it sets the process umask to 0o077 (so every file made from then on, SQLite's included, is
owner-only), creates the directory 0700, and tightens what an older Carrier left readable, once
per start. Only Carrier's own entries are touched: a data dir pointed at a shared folder keeps
the other files in it as they are.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from carrier.settings import Settings

__all__ = ["OWNED", "private_data_dir", "private_umask"]

log = logging.getLogger(__name__)

OWNED = (
    "carrier.db",
    "carrier.db-wal",
    "carrier.db-shm",
    "carrier.db-journal",
    "carrier.db.vectors",
    "secret.key",
    "admin.token",
    "media",
    "uploads",
)
"""The entries of the data dir that are Carrier's (files, or folders tightened throughout)."""


def private_umask() -> None:
    """Files and folders this process makes from now on are its user's only."""
    os.umask(0o077)


def private_data_dir(settings: Settings) -> Settings:
    """Make ``settings.data_dir`` private (see the module's docstring); returns ``settings`` so a
    command can write ``open_store(private_data_dir(load_settings()))``. A file that cannot be
    tightened (owned by another user) is logged, not fatal."""
    private_umask()
    data_dir = settings.data_dir
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(data_dir)
    for name in OWNED:
        for path in _tree(data_dir / name):
            _tighten(path)
    return settings


def _tree(top: Path) -> Iterator[Path]:
    """``top`` and, for a folder, everything under it; symbolic links are not followed."""
    if top.is_symlink() or not top.exists():
        return
    yield top
    if top.is_dir():
        for root, dirs, files in os.walk(top):
            for name in [*dirs, *files]:
                path = Path(root, name)
                if not path.is_symlink():
                    yield path


def _tighten(path: Path) -> None:
    """Take group's and others' bits away; the owner's stay as they are."""
    try:
        current = stat.S_IMODE(path.lstat().st_mode)
        if current & 0o077:
            path.chmod(current & 0o700)
    except OSError as exc:
        log.warning("could not make %s private (chmod go-rwx %s): %s", path, path, exc)
