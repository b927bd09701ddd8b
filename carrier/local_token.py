"""The admin token of a server without ``CARRIER_ADMIN_TOKEN``, and how the operator gets it.

Loopback is not a user: every process and every browser page on the machine can reach
``127.0.0.1``. So the API always wants a token. When the operator set none, Carrier mints one on
first start into ``<data_dir>/admin.token`` (owner-only, 256 random bits, reused on later starts
and by every process sharing the data dir), and ``carrier run``/``carrier serve`` hand it to the
console in the URL's fragment (``/console#token=...``), which the browser never sends to a
server and the page removes from the address bar once read. The fragment is printed only to a
terminal: a log collector (journald, CI) gets the path of the file instead.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from carrier.settings import Settings

__all__ = ["TOKEN_FILE", "AdminToken", "admin_token", "console_invitation", "ensure_local_token"]

TOKEN_FILE = "admin.token"


@dataclass(frozen=True, slots=True)
class AdminToken:
    """The token the API accepts as admin, and where it came from."""

    value: str
    path: Path | None
    """The file it was read from (a minted local token), or None for ``CARRIER_ADMIN_TOKEN``."""

    def __repr__(self) -> str:  # never the value
        return f"AdminToken(path={self.path!r})"


def ensure_local_token(data_dir: Path) -> Path:
    """``<data_dir>/admin.token``, minted if missing or empty (0600, created exclusively, so two
    processes starting at once agree on one token); returns its path."""
    path = data_dir / TOKEN_FILE
    if _read(path):
        return path
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(value + "\n")
    try:
        os.link(tmp, path)  # fails if another process made one meanwhile: theirs wins
    except FileExistsError:
        if not _read(path):  # an empty file left by hand: replace it
            os.replace(tmp, path)
            return path
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""


def admin_token(settings: Settings) -> AdminToken:
    """``CARRIER_ADMIN_TOKEN`` when set, else the local token (minted on first use)."""
    if settings.admin_token is not None:
        return AdminToken(settings.admin_token.get_secret_value(), None)
    path = ensure_local_token(settings.data_dir)
    return AdminToken(_read(path), path)


def console_invitation(url: str, token: AdminToken, *, terminal: bool) -> str:
    """What ``carrier run``/``carrier serve`` print once the API listens at ``url``.

    On a terminal, a local token rides in the console URL's fragment (one click signs the
    console in). Anywhere else (a pipe, journald, a CI log) the token is not printed: the line
    says where it is. ``CARRIER_ADMIN_TOKEN`` is never printed: the operator chose it and has it.
    """
    console = f"{url}/console"
    if token.path is None:
        return (
            f"agent API and console on {console} (Ctrl-C to stop); sign in with CARRIER_ADMIN_TOKEN"
        )
    if terminal:
        return f"agent API and console on {console}#token={token.value} (Ctrl-C to stop)"
    return (
        f"agent API and console on {console} (Ctrl-C to stop); the admin token is in {token.path}"
    )
