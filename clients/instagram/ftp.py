"""The FTP media host: Instagram's Graph API fetches media by public URL, so files go to an FTP
server whose directory is served over HTTP(S).

Files get ASCII-safe unique names (``<slug>-<random>.<ext>``), the public URL is checked (200
and an image/video content type) before a container is created, and files are deleted after
publishing when configured. The password comes from a secret, and never appears in messages.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import unicodedata
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import aioftp
import httpx

from clients.instagram.config import FtpSettings
from clients.instagram.errors import MediaHostError
from clients.instagram.post import HostedFile

__all__ = ["FtpMediaHost", "slugify", "unique_name"]

log = logging.getLogger(__name__)


def slugify(text: str, *, max_length: int = 40) -> str:
    """ASCII letters, digits and dashes only (``"Café à Lisboa!"`` → ``"cafe-a-lisboa"``)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug[:max_length].rstrip("-") or "media"


def unique_name(slug: str, extension: str) -> str:
    """``<slug>-<8 hex chars><extension>``: unguessable and never colliding in practice."""
    ext = extension.lower() if re.fullmatch(r"\.[A-Za-z0-9]{1,5}", extension) else ""
    return f"{slugify(slug)}-{secrets.token_hex(4)}{ext}"


class FtpMediaHost:
    """Upload, check and delete media on an FTP server served at ``base_url``."""

    def __init__(
        self,
        *,
        host: str,
        port: int = 21,
        user: str,
        password: str,
        directory: str = "/",
        base_url: str,
        tls: bool = False,
        http: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
        check_attempts: int = 3,
        check_delay: float = 2.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.host = host
        self.port = port
        self.user = user
        self._password = password
        self.directory = PurePosixPath("/" + directory.strip("/"))
        self.base_url = base_url.rstrip("/")
        self.tls = tls
        self.timeout = timeout
        self.check_attempts = max(1, check_attempts)
        self.check_delay = check_delay
        self._sleep = sleep
        self._http = http

    @classmethod
    def from_settings(
        cls, settings: FtpSettings, *, user: str | None, password: str, **kwargs: Any
    ) -> FtpMediaHost:
        return cls(
            host=settings.host,
            port=settings.port,
            user=settings.user or user or "anonymous",
            password=password,
            directory=settings.directory,
            base_url=settings.base_url,
            tls=settings.tls,
            **kwargs,
        )

    def __repr__(self) -> str:
        return f"FtpMediaHost({self.user}@{self.host}:{self.port}{self.directory})"

    @property
    def _where(self) -> str:
        return f"ftp://{self.user}@{self.host}:{self.port}{self.directory}"

    def _client(self) -> Any:
        return aioftp.Client.context(
            self.host,
            self.port,
            user=self.user,
            password=self._password,
            upgrade_to_tls=self.tls,
            socket_timeout=self.timeout,
            connection_timeout=self.timeout,
        )

    async def upload(self, path: Path, *, slug: str, content_type: str) -> HostedFile:
        """Upload ``path`` under a fresh unique name; returns where it is and its public URL."""
        name = unique_name(slug, path.suffix)
        remote = self.directory / name
        try:
            async with self._client() as client:
                if str(self.directory) != "/":
                    await client.make_directory(self.directory)
                await client.upload(path, remote, write_into=True)
        except (aioftp.StatusCodeError, OSError, TimeoutError) as exc:
            raise MediaHostError(
                f"uploading {path.name} to {self._where} failed: {_describe(exc)}"
            ) from None
        url = f"{self.base_url}/{quote(name)}"
        log.info("uploaded %s to %s (%s)", path.name, remote, url)
        return HostedFile(remote_path=str(remote), url=url, content_type=content_type)

    async def verify(self, hosted: HostedFile) -> None:
        """Check the public URL answers 200 with the right kind of content, as Instagram needs."""
        expected = hosted.content_type.split("/")[0] + "/"
        problem = ""
        for attempt in range(self.check_attempts):
            if attempt:
                await self._sleep(self.check_delay * attempt)
            problem = await self._probe(hosted.url, expected)
            if not problem:
                return
        raise MediaHostError(
            f"{hosted.url} {problem}; Instagram downloads media from this URL, so it must answer "
            f"200 with a {expected}* content type: check that ftp.baseUrl ({self.base_url}) serves "
            f"ftp.directory ({self.directory})"
        )

    async def _probe(self, url: str, expected: str) -> str:
        http = self._http or httpx.AsyncClient(timeout=self.timeout)
        try:
            response = await http.head(url, follow_redirects=True)
            if response.status_code in (403, 405, 501):  # some hosts refuse HEAD
                async with http.stream("GET", url, follow_redirects=True) as streamed:
                    response = streamed
        except httpx.HTTPError as exc:
            return f"could not be fetched ({type(exc).__name__}: {exc})"
        finally:
            if self._http is None:
                await http.aclose()
        content_type = response.headers.get("content-type", "")
        if response.status_code != 200:
            return f"answered HTTP {response.status_code}"
        if not content_type.lower().startswith(expected):
            return f"is served as {content_type or 'no content type'!r}"
        return ""

    async def delete(self, hosted: HostedFile) -> bool:
        """Remove a file (after publishing). Failures are logged, not raised: the post is out."""
        try:
            async with self._client() as client:
                await client.remove_file(hosted.remote_path)
        except aioftp.StatusCodeError as exc:
            if "550" in str(exc):  # already gone
                return True
            log.warning("could not delete %s from %s: %s", hosted.remote_path, self._where, exc)
            return False
        except (OSError, TimeoutError) as exc:
            log.warning("could not delete %s from %s: %s", hosted.remote_path, self._where, exc)
            return False
        return True


def _describe(exc: BaseException) -> str:
    if isinstance(exc, aioftp.StatusCodeError):
        received = ", ".join(str(code) for code in exc.received_codes)
        info = " ".join(str(line) for line in exc.info).strip()
        return f"server answered {received}: {info}" if info else f"server answered {received}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
