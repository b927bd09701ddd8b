"""The FTP media host against a real aioftp server on loopback."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from clients.instagram.errors import MediaHostError
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.ftp import FtpMediaHost, slugify, unique_name
from tests.clients.instagram.helpers import FTP_PASSWORD, FTP_USER, ManualClock, make_image


def test_names_are_ascii_unique_and_keep_the_extension() -> None:
    assert slugify("Café à Lisboa — 35mm!") == "cafe-a-lisboa-35mm"
    assert slugify("日本語") == "media"
    names = {unique_name("Fog at six", ".JPG") for _ in range(50)}
    assert len(names) == 50
    assert all(re.fullmatch(r"fog-at-six-[0-9a-f]{8}\.jpg", n) for n in names)


def host(
    ftp_server: tuple[str, int], base_url: str, clock: ManualClock, **kw: object
) -> FtpMediaHost:
    options: dict[str, object] = {
        "host": ftp_server[0],
        "port": ftp_server[1],
        "user": FTP_USER,
        "password": FTP_PASSWORD,
        "directory": "/media/2025",
        "base_url": base_url,
        "sleep": clock.sleep,
    }
    options.update(kw)
    return FtpMediaHost(**options)  # type: ignore[arg-type]


async def test_upload_verify_delete(
    ftp_server: tuple[str, int],
    ftp_root: Path,
    fake_graph: FakeGraphAPI,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    fake_graph.static_root = ftp_root / "media" / "2025"
    media_host = host(ftp_server, fake_graph.media_url, clock)
    hosted = await media_host.upload(
        make_image(tmp_path / "a.jpg"), slug="Été", content_type="image/jpeg"
    )

    assert hosted.remote_path.startswith("/media/2025/ete-") and hosted.url.startswith(
        fake_graph.media_url
    )
    assert (ftp_root / hosted.remote_path.lstrip("/")).is_file()
    await media_host.verify(hosted)
    assert await media_host.delete(hosted) is True
    assert not (ftp_root / hosted.remote_path.lstrip("/")).exists()
    assert await media_host.delete(hosted) is True  # already gone is fine


async def test_a_url_that_does_not_serve_the_file_fails_clearly(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI, clock: ManualClock, tmp_path: Path
) -> None:
    media_host = host(ftp_server, fake_graph.url + "/wrong", clock)  # baseUrl does not match
    hosted = await media_host.upload(
        make_image(tmp_path / "a.jpg"), slug="a", content_type="image/jpeg"
    )

    with pytest.raises(MediaHostError) as info:
        await media_host.verify(hosted)

    message = str(info.value)
    assert "answered HTTP 404" in message and "check that ftp.baseUrl" in message
    assert clock.slept == [2.0, 4.0]  # retried (a CDN may lag) with injected sleeps


async def test_a_wrong_content_type_fails_clearly(
    ftp_server: tuple[str, int], clock: ManualClock, tmp_path: Path
) -> None:
    def serve_html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/html"}, text="<html>")

    http = httpx.AsyncClient(transport=httpx.MockTransport(serve_html))
    media_host = host(ftp_server, "http://127.0.0.1:9/m", clock, http=http, check_attempts=1)
    hosted = await media_host.upload(
        make_image(tmp_path / "a.jpg"), slug="a", content_type="image/jpeg"
    )
    with pytest.raises(MediaHostError, match="is served as 'text/html'"):
        await media_host.verify(hosted)
    await http.aclose()


async def test_a_refused_login_fails_without_revealing_the_password(
    ftp_server: tuple[str, int], clock: ManualClock, tmp_path: Path
) -> None:
    media_host = host(ftp_server, "http://127.0.0.1:9/m", clock, password="not-the-password")
    with pytest.raises(MediaHostError) as info:
        await media_host.upload(make_image(tmp_path / "a.jpg"), slug="a", content_type="image/jpeg")
    message = str(info.value)
    assert f"ftp://{FTP_USER}@127.0.0.1:{ftp_server[1]}/media/2025" in message
    assert "not-the-password" not in message and "not-the-password" not in repr(media_host)
