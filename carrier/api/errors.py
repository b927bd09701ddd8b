"""Error responses: every 4xx says what was wrong and where; a 500 only for true bugs.

All errors share one body, :class:`~carrier.api.schemas.ErrorBody`:
``{"error": code, "message": text, "problems": [{"path", "message", "file"}]}``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from carrier.agents import AgentExists, AgentNotFound, AgentNotRunning, ClientConfigError
from carrier.agents.errors import RevisionNotFound
from carrier.agents.imports import ImportConflict
from carrier.api.schemas import ErrorBody, ProblemOut
from carrier.errors import CharacterError, ProviderError, StoreError, UserError
from carrier.fleet.base import RevisionConflict

__all__ = ["ApiError", "BodyTooLarge", "error_responses", "install_error_handlers"]

log = logging.getLogger(__name__)


class ApiError(Exception):
    """Raised by routes for an error response with a code, a message and field problems."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        problems: Iterable[ProblemOut] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.problems = list(problems)
        self.headers = dict(headers or {})


class BodyTooLarge(HTTPException):
    """A request body over its limit. An HTTPException, so FastAPI's body parsing lets it
    through unchanged."""

    def __init__(self, limit: int, what: str, setting: str) -> None:
        super().__init__(
            413,
            f"the {what} is larger than the limit of {limit} bytes (set {setting} to change it)",
        )


def error_json(
    status: int,
    code: str,
    message: str,
    problems: Iterable[ProblemOut] = (),
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(error=code, message=message, problems=list(problems))
    return JSONResponse(body.model_dump(), status_code=status, headers=dict(headers or {}))


_DESCRIPTIONS = {
    400: "The request is malformed.",
    401: "No valid bearer token (see WWW-Authenticate).",
    403: "The token may not do this.",
    404: "No such agent, revision, entity, token or client.",
    409: "The request conflicts with the current state (exists already, not running, "
    "changed since the given revision, ...).",
    413: "The body is larger than the configured limit.",
    415: "The body's content type is not accepted here.",
    422: "The input is invalid; `problems` lists every field path and what was expected.",
    429: "Rate limited; retry after the number of seconds in Retry-After.",
    502: "The model provider failed.",
    503: "The store is unreachable.",
}
_HEADERS = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "Bearer"}},
    429: {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}},
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the given error codes, all with the ErrorBody schema."""
    return {
        code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]}
        | ({"headers": _HEADERS[code]} if code in _HEADERS else {})
        for code in codes
    }


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def _code(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_json(exc.status, exc.code, exc.message, exc.problems, exc.headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    message = str(exc.detail)
    if exc.status_code == 405:
        allowed = _allowed_methods(request)
        headers["Allow"] = ", ".join(allowed)
        message = f"{request.method} is not allowed here; allowed: {', '.join(allowed)}"
    return error_json(exc.status_code, _code(exc.status_code), message, (), headers)


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette names only the first route's)."""
    allowed = []
    for method in _METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return allowed


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        ProblemOut(path=".".join(str(part) for part in err.get("loc", ())), message=err["msg"])
        for err in exc.errors()
    ]
    where = ", ".join(p.path for p in problems) or "the request"
    return error_json(422, "invalid_request", f"invalid input at {where}", problems)


async def _carrier_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, AgentNotFound):
        return error_json(404, "agent_not_found", str(exc))
    if isinstance(exc, AgentExists):
        return error_json(409, "agent_exists", str(exc))
    if isinstance(exc, RevisionNotFound):
        return error_json(404, "revision_not_found", str(exc))
    if isinstance(exc, RevisionConflict):
        problem = ProblemOut(
            path="query.revision",
            message=f"expected revision {exc.expected}; the head is revision {exc.actual}",
        )
        return error_json(409, "revision_conflict", str(exc), [problem])
    if isinstance(exc, ImportConflict):
        return error_json(409, "import_conflict", str(exc))
    if isinstance(exc, AgentNotRunning):
        message = f"{exc}: POST /agents/{exc.agent_id}/start"
        return error_json(409, "agent_not_running", message)
    if isinstance(exc, CharacterError):
        problems = [ProblemOut(path=p.path, message=p.message, file=exc.file) for p in exc.problems]
        return error_json(422, "invalid_character", str(exc), problems)
    if isinstance(exc, ClientConfigError):
        problems = [ProblemOut(path=p.path, message=p.message) for p in exc.problems]
        return error_json(422, "invalid_client_config", str(exc), problems)
    if isinstance(exc, UserError):
        return error_json(422, "invalid_request", str(exc))
    if isinstance(exc, ProviderError):
        return error_json(502, "provider_failed", f"the model provider failed: {exc}")
    if isinstance(exc, StoreError):
        log.error("store error: %s", exc)
        return error_json(503, "store_unavailable", "the store is unreachable; try again later")
    return await _bug(request, exc)


async def _bug(request: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.error("http")
    return error_json(500, "internal_error", "internal error; the server log has the details")


def install_error_handlers(app: FastAPI) -> None:
    from carrier.errors import CarrierError

    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(CarrierError, _carrier_error)
    app.add_exception_handler(Exception, _bug)
