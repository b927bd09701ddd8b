"""The spec of an HTTP tool, as an operator registers it (``POST /tools``).

Besides the endpoint (URL, method, JSON-schema parameters, headers that reference environment
variables), a spec says who may set the tool off and how:

- ``trigger``: ``everyone``, ``room_admins`` (people the platform says administer the room:
  Discord's Administrator or Manage Server; the API's admin token), or ``users`` (the
  ``platform:id`` listed in ``users``). Left out, it is ``everyone`` for a ``GET`` (reads, by
  HTTP's own rules) and ``room_admins`` for anything else (it may change something): a tool
  that acts is closed to strangers until the operator opens it.
- ``approval: required``: a call is not run but parked for a human (a job awaiting approval,
  expiring after ``approval_hours``).
- ``calls_per_hour``: how many calls one person may set off in an hour (default
  ``CARRIER_TOOL_CALLS_PER_HOUR``).
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from carrier.character.secrets import LiteralSecretError, SecretRef, parse_secret_ref

__all__ = ["TOOL_NAME", "ToolSpec", "Trigger"]

TOOL_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
_NAME = re.compile(TOOL_NAME)
_USER = re.compile(r"^[a-z][a-z0-9_]{0,31}:[^\s]{1,200}$")

Trigger = Literal["everyone", "room_admins", "users"]


class ToolSpec(BaseModel):
    """An HTTP tool as registered by an operator."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Tool name the model calls, letters, digits, _ and -, max 64.")
    description: str = Field(min_length=1, max_length=1024)
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON schema (type object) of the arguments.",
    )
    url: str = Field(
        description="http(s) URL; GET sends the arguments as query parameters, other methods as a JSON body."
    )
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str | dict[str, str]] = Field(
        default_factory=dict,
        description='Header values are environment references ("$NAME", "${NAME}" or '
        '{"env": "NAME"}) to variables the operator allows in CARRIER_TOOL_ENV.',
    )
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Hosts the tool may reach; defaults to the URL's host."
    )
    agent_ids: list[str] | None = Field(
        default=None, description="Agents that get the tool; all when unset."
    )
    trigger: Trigger | None = Field(
        default=None,
        description="Who may set the tool off: everyone, room_admins, or the listed users. "
        "Default: everyone for GET, room_admins for other methods.",
    )
    users: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description='With trigger "users": who, as "platform:id" (e.g. "discord:80351110224678912").',
    )
    approval: Literal["none", "required"] = Field(
        default="none",
        description='"required": each call waits for a human to approve it before it runs.',
    )
    approval_hours: float = Field(
        default=24.0,
        gt=0,
        le=720,
        description="How long a call waits for approval before it is dropped.",
    )
    calls_per_hour: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="Calls one person may set off per hour (default CARRIER_TOOL_CALLS_PER_HOUR).",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                "must start with a letter and hold only letters, digits, _ and - (at most 64)"
            )
        if value == "approvals":  # /tools/approvals lists the calls waiting for approval
            raise ValueError("approvals is a reserved name; choose another")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an absolute http:// or https:// URL")
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "must not carry credentials (user:password@); send them in a header that "
                "references an environment variable"
            )
        return value

    @field_validator("parameters")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        if value.get("type") != "object":
            raise ValueError('must be a JSON schema with "type": "object"')
        try:
            Draft202012Validator.check_schema(value)
        except SchemaError as exc:
            raise ValueError(f"is not a valid JSON schema: {exc.message}") from None
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, ref in value.items():
            try:
                parsed = parse_secret_ref(name, ref)
            except LiteralSecretError:
                parsed = SecretRef(name, None)
            if parsed.env is None:
                raise ValueError(
                    f"header {name!r} must reference an environment variable "
                    '("$NAME", "${NAME}" or {"env": "NAME"}), not hold a literal value'
                )
        return value

    @field_validator("users")
    @classmethod
    def _users(cls, value: list[str]) -> list[str]:
        for user in value:
            if not _USER.match(user):
                raise ValueError(
                    f'{user[:80]!r} is not "platform:id" (e.g. "discord:80351110224678912")'
                )
        return value

    @model_validator(mode="after")
    def _hosts_and_trigger(self) -> ToolSpec:
        host = urlsplit(self.url).hostname or ""
        if not self.allowed_hosts:
            self.allowed_hosts = [host]
        elif host not in self.allowed_hosts:
            raise ValueError(
                f"the URL's host {host!r} is not in allowed_hosts {self.allowed_hosts}"
            )
        if self.trigger is None:
            self.trigger = "everyone" if self.method == "GET" else "room_admins"
        if self.trigger == "users" and not self.users:
            raise ValueError('trigger "users" needs the list of users ("platform:id")')
        if self.trigger != "users" and self.users:
            raise ValueError('users is read only with trigger "users"; set trigger: users')
        return self

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    def header_refs(self) -> list[SecretRef]:
        """The environment references of the headers (validated when the spec was built)."""
        return [parse_secret_ref(name, raw) for name, raw in self.headers.items()]

    def openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def public(self) -> dict[str, Any]:
        """The spec as shown over the API: header references named, never resolved."""
        return self.model_dump(mode="json")
