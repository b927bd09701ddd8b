"""Connecting to MongoDB from a URI, and driver errors as StoreErrors that name what failed and
never show the password: shared by the MongoDB memory store and the MongoDB job store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from bson.errors import BSONError
from pymongo import AsyncMongoClient
from pymongo.errors import OperationFailure, PyMongoError, ServerSelectionTimeoutError

from carrier.errors import ConfigError, StoreError

__all__ = ["DEFAULT_DATABASE", "Connection", "connection", "translated"]

DEFAULT_DATABASE = "carrier"
"""The database used when the URI names none."""

SERVER_SELECTION_TIMEOUT_MS = 10_000
"""How long to wait for a server unless the URI says otherwise."""

_AUTHENTICATION_FAILED = 18
_DRIVER_ERRORS = (PyMongoError, BSONError, OverflowError)
"""What the driver raises; OverflowError is BSON's answer to an int wider than 64 bits."""

Document = dict[str, Any]


def _password(uri: str) -> str | None:
    userinfo = urlsplit(uri).netloc.rpartition("@")[0]
    return userinfo.partition(":")[2] or None


def _scrub(message: str, secret: str | None) -> str:
    if secret:
        for form in {secret, unquote(secret)}:
            message = message.replace(form, "***")
    return message


@dataclass(frozen=True)
class Connection:
    """What a MongoDB URI names, and how to make a client for it."""

    url: str = field(repr=False)
    appname: str
    database: str
    """The URI's path, or :data:`DEFAULT_DATABASE`."""
    where: str
    """``scheme://hosts/database``: no user, password or options, safe to show."""
    secret: str | None = field(repr=False)
    """The password, to scrub from messages."""

    def client(self) -> AsyncMongoClient[Document]:
        """A new client (no I/O until first use); :class:`ConfigError` if the URI is invalid."""
        options: dict[str, Any] = {"appname": self.appname}
        if "serverselectiontimeoutms" not in urlsplit(self.url).query.lower():
            options["serverSelectionTimeoutMS"] = SERVER_SELECTION_TIMEOUT_MS
        try:
            return AsyncMongoClient(self.url, **options)
        except (PyMongoError, ValueError, TypeError) as exc:
            message = _scrub(str(exc), self.secret)
            raise ConfigError(
                f"invalid MongoDB URI {self.where!r}: {message}; fix CARRIER_MONGODB_URI"
            ) from None


def connection(url: str, *, appname: str) -> Connection:
    """Read a MongoDB URI; :class:`ConfigError` naming ``CARRIER_MONGODB_URI`` if it is not one."""
    if not url.startswith(("mongodb://", "mongodb+srv://")):
        scheme = url.partition("://")[0] if "://" in url else "no scheme"
        raise ConfigError(
            f"not a MongoDB URI ({scheme}); set CARRIER_MONGODB_URI to "
            "mongodb://host:27017/carrier (or mongodb+srv://user:password@host/carrier)"
        )
    parts = urlsplit(url)
    database = unquote(parts.path.strip("/")) or DEFAULT_DATABASE
    where = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/{database}"
    return Connection(url, appname, database, where, _password(url))


def _describe(exc: BaseException) -> str:
    """A one-line account of a driver error, with what to check where that is clear."""
    if isinstance(exc, ServerSelectionTimeoutError):
        reason = str(exc).partition(", Timeout:")[0]
        return f"no server answered ({reason}); is it running, and is CARRIER_MONGODB_URI right?"
    if isinstance(exc, OperationFailure):
        message = str((exc.details or {}).get("errmsg") or exc).partition(", full error:")[0]
        if exc.code == _AUTHENTICATION_FAILED:
            return f"{message}; check the user and password in CARRIER_MONGODB_URI"
        return f"{message} (code {exc.code})" if exc.code is not None else message
    return str(exc)


@contextmanager
def translated(
    where: str, what: str, secret: str | None, *, store: str = "MongoDB store"
) -> Iterator[None]:
    """Driver errors in the block as ``StoreError("<store> <where>: <what> failed: ...")`` with
    ``secret`` scrubbed."""
    try:
        yield
    except _DRIVER_ERRORS as exc:
        message = _scrub(_describe(exc), secret)
        raise StoreError(f"{store} {where}: {what} failed: {message}") from exc
