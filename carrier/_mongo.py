"""Connecting to MongoDB from a URI, the database a store works in (its client, opened with the
store's migration, closed with it when the store made it), and driver errors as StoreErrors that
name what failed and never show the password: shared by the MongoDB memory store, job store and
audit log."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from bson.errors import BSONError
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import OperationFailure, PyMongoError, ServerSelectionTimeoutError

from carrier.errors import ConfigError, StoreError

__all__ = ["DEFAULT_DATABASE", "Connection", "MongoHandle", "connection", "translated"]

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


class MongoHandle:
    """The one MongoDB database a store works in.

    Takes an ``AsyncMongoClient`` the caller owns (and closes), or, through :meth:`from_url`,
    makes its own: closed by :meth:`close`, made anew by a later :meth:`open`. ``store`` names the
    store in errors (``MongoDB job store``), ``opener`` says how to open it (``MongoJobStore``).
    """

    def __init__(
        self, client: AsyncMongoClient[Document], database: str, *, store: str, opener: str
    ) -> None:
        self.database = database
        self.store, self.opener = store, opener
        self._client: AsyncMongoClient[Document] | None = client
        seeds = sorted(client.topology_description.server_descriptions())
        self.where = f"mongodb://{','.join(f'{h}:{p}' for h, p in seeds)}/{database}"
        """``scheme://hosts/database``: safe to show."""
        self._make_client: Callable[[], AsyncMongoClient[Document]] | None = None
        """Set when the handle owns its client: closed by close(), made anew by open()."""
        self._secret: str | None = None
        self._db: AsyncDatabase[Document] | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str, *, appname: str, store: str, opener: str) -> MongoHandle:
        """A handle on the database a MongoDB URI names (default ``carrier``), with a client of
        its own; nothing is connected until :meth:`open`."""
        conn = connection(url, appname=appname)
        handle = cls(conn.client(), conn.database, store=store, opener=opener)
        handle.where, handle._make_client, handle._secret = conn.where, conn.client, conn.secret
        return handle

    @property
    def is_open(self) -> bool:
        return self._db is not None

    async def open(self, prepare: Callable[[AsyncDatabase[Document]], Awaitable[None]]) -> bool:
        """Connect and run ``prepare(db)`` (the store's migration and checks); True when this
        call opened it, False when it was open already. A failed open closes a client it made."""
        async with self._lock:
            if self._db is not None:
                return False
            if self._client is None:  # reopening after close(): only an owned client is dropped
                assert self._make_client is not None
                self._client = self._make_client()
            db = self._client[self.database]
            try:
                with self.errors("opening"):
                    await prepare(db)
            except BaseException:
                await self.close()
                raise
            self._db = db
            return True

    async def close(self) -> None:
        """Forget the database; close the client if the handle made it. Safe to call twice."""
        self._db = None
        client = self._client
        if client is not None and self._make_client is not None:  # only a client it made
            self._client = None
            with self.errors("closing"):
                await client.close()

    def errors(self, what: str) -> AbstractContextManager[None]:
        """Driver errors in the block as ``StoreError``s naming ``what`` failed, no password."""
        return translated(self.where, what, self._secret, store=self.store)

    def db(self) -> AsyncDatabase[Document]:
        """The open database; a :class:`StoreError` saying how to open it otherwise."""
        if self._db is None:
            raise StoreError(
                f"{self.store} {self.where} is not open; use `async with "
                f"{self.opener}.from_url(...)` or await its open() first"
            )
        return self._db
