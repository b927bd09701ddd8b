"""Turning driver errors into StoreErrors that name what failed and never show a password."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote, urlsplit

from bson.errors import BSONError
from pymongo.errors import OperationFailure, PyMongoError, ServerSelectionTimeoutError

from carrier.errors import StoreError

__all__ = ["describe", "password", "redact", "scrub", "translated"]

_AUTHENTICATION_FAILED = 18
_DRIVER_ERRORS = (PyMongoError, BSONError, OverflowError)
"""What the driver raises; OverflowError is BSON's answer to an int wider than 64 bits."""


def redact(uri: str) -> str:
    """The URI without user, password and options, safe for messages and logs."""
    parts = urlsplit(uri)
    hosts = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{hosts}{parts.path}" if parts.scheme else "<unparsable URI>"


def password(uri: str) -> str | None:
    """The password in a URI, if it has one (to scrub it from messages)."""
    userinfo = urlsplit(uri).netloc.rpartition("@")[0]
    return userinfo.partition(":")[2] or None


def scrub(message: str, secret: str | None) -> str:
    """``message`` with ``secret`` (raw or percent-decoded) replaced by ``***``."""
    if secret:
        for form in {secret, unquote(secret)}:
            message = message.replace(form, "***")
    return message


def describe(exc: BaseException) -> str:
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
def translated(where: str, what: str, secret: str | None) -> Iterator[None]:
    """Raise driver errors inside the block as ``StoreError("MongoDB store <where>: <what> ...")``."""
    try:
        yield
    except _DRIVER_ERRORS as exc:
        message = scrub(describe(exc), secret)
        raise StoreError(f"MongoDB store {where}: {what} failed: {message}") from exc
