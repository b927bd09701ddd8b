"""The data dir (``CARRIER_DATA_DIR``): usable, and private enough for what it holds.

It holds the embedded store (``carrier.db``, every conversation) and, unless
``CARRIER_SECRET_KEY`` is set, the generated key that encrypts stored secrets; so it must be
writable by Carrier and readable by nobody else. Nothing is left behind: a directory that does
not exist yet is tried with a temporary sibling, a writable one with a temporary file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from carrier.doctor.base import Result, fail, ok, warn

__all__ = ["check_data_dir", "check_secret_key", "stored_secret_key"]

SECRET_KEY_ENV = "CARRIER_SECRET_KEY"
SECRET_KEY_FILE = "secret.key"


def _probe_write(directory: Path) -> OSError | None:
    """Create and remove a file in ``directory``: the only answer root and ACLs cannot fool."""
    try:
        fd, name = tempfile.mkstemp(prefix=".carrier-doctor-", dir=directory)
    except OSError as exc:
        return exc
    os.close(fd)
    os.unlink(name)
    return None


def _probe_create(path: Path) -> OSError | None:
    """Whether ``path`` could be made: make a temporary directory where its first missing part
    would go, then remove it."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return NotADirectoryError(f"{parent} is not a directory")
    try:
        made = tempfile.mkdtemp(prefix=".carrier-doctor-", dir=parent)
    except OSError as exc:
        return exc
    os.rmdir(made)
    return None


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_data_dir(data_dir: Path) -> Result:
    """Exists (or can be created), is writable, and is not readable by group or others."""
    name = "data dir"
    choose = "set CARRIER_DATA_DIR to a directory this user can write"
    if not data_dir.exists():
        problem = _probe_create(data_dir)
        if problem is not None:
            return fail(
                name, f"{data_dir} does not exist and cannot be created ({_why(problem)})", choose
            )
        return ok(name, f"{data_dir} does not exist yet; carrier run creates it")
    if not data_dir.is_dir():
        return fail(name, f"{data_dir} is not a directory", f"move the file away, or {choose}")
    problem = _probe_write(data_dir)
    if problem is not None:
        return fail(
            name,
            f"{data_dir} is not writable ({_why(problem)})",
            f"chown/chmod it for the user that runs carrier (chmod 700 {data_dir}), or {choose}",
        )
    mode = stat.S_IMODE(data_dir.stat().st_mode)
    if mode & 0o044:
        return warn(
            name,
            f"{data_dir} is writable but readable by group or others (mode {mode:04o}); it holds "
            "carrier.db and the generated secret key",
            f"chmod 700 {data_dir}",
        )
    return ok(name, f"{data_dir} is writable, owner only (mode {mode:04o})")


def stored_secret_key(data_dir: Path) -> str | None:
    """The generated key in the data dir, if there is one that can be read (never made here)."""
    try:
        return (data_dir / SECRET_KEY_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def check_secret_key(data_dir: Path, environ: Mapping[str, str]) -> Result:
    """Where ``CARRIER_SECRET_KEY`` comes from: the environment, or the data dir's key file."""
    name = "secret key"
    if environ.get(SECRET_KEY_ENV):
        return ok(name, f"{SECRET_KEY_ENV} is set")
    path = data_dir / SECRET_KEY_FILE
    if not path.exists():
        return ok(
            name,
            f"{SECRET_KEY_ENV} is not set: carrier run generates a key into {path} (for "
            f"production, set {SECRET_KEY_ENV} so the key does not live beside the data)",
        )
    if not path.is_file():
        return fail(name, f"{path} is not a file", f"remove it, or set {SECRET_KEY_ENV}")
    if stored_secret_key(data_dir) is None:
        return fail(
            name,
            f"{path} cannot be read or is empty",
            f"make it readable by the user that runs carrier, or set {SECRET_KEY_ENV}; a new "
            "key makes stored secrets (an instagrapi session) unreadable",
        )
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o044:
        return warn(
            name,
            f"{path} (the generated key) is readable by group or others (mode {mode:04o})",
            f"chmod 600 {path}",
        )
    return ok(name, f"generated key in {path} ({SECRET_KEY_ENV} is not set)")
