"""What the Instagram adapter offers the console through the ``carrier.console`` entry point,
over loopback: the real API (uvicorn) asks the fake Graph API's ``content_publishing_limit``
for the account's quota (the posts Carrier recorded when Instagram cannot be asked, with the
reason), and serves a draft's image converted byte for byte as ``prepare_post`` converts it
before an upload, refusing what Instagram would refuse with what to do."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

from carrier.console import discover_console_providers
from clients.instagram import InstagramClient, parse_config, prepare_post
from clients.instagram.console import InstagramConsole
from clients.instagram.post import Post, PostKind
from tests.clients.instagram._conversation_world import ADMIN, World
from tests.clients.instagram.helpers import make_image

ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN}"}


async def _quota(w: World, headers: dict[str, str] = ADMIN_HEADERS) -> dict[str, Any]:
    answer = await w.http.get(f"{w.url}/agents/{w.agent_id}/quotas", headers=headers)
    assert answer.status_code == 200, answer.text
    [quota] = answer.json()
    return dict(quota)


def test_the_provider_is_installed_under_the_console_group() -> None:
    factory = discover_console_providers()["instagram"]
    assert isinstance(factory(object()), InstagramConsole)


async def test_the_quota_is_instagrams_own_count_or_carriers_with_the_reason(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world()
    w.graph.quota_usage, w.graph.quota_total = 3, 25
    quota = await _quota(w)
    assert quota["source"] == "platform" and quota["note"] is None
    assert (quota["used"], quota["limit"], quota["window_s"]) == (3, 25, 86400)
    assert (quota["carrier_used"], quota["carrier_limit"]) == (0, 50)

    # Carrier publishes: Instagram's count is asked again at once (not kept for a minute).
    client = w.manager.client(w.agent_id, "instagram")
    assert isinstance(client, InstagramClient)
    await client.publisher.counter.record()  # type: ignore[union-attr]
    w.graph.quota_usage = 4
    quota = await _quota(w)
    assert (quota["used"], quota["carrier_used"]) == (4, 1)
    assert quota["next_free_at"] is not None

    # Instagram refuses the call: Carrier's own count, and why.
    w.graph.token = "another-token"
    w.graph.quota_usage = 9  # not seen
    await client.publisher.counter.record()  # type: ignore[union-attr]
    quota = await _quota(w)
    assert quota["source"] == "carrier"
    assert (quota["used"], quota["limit"]) == (2, 50)
    assert "Instagram's own count could not be read" in quota["note"]
    assert "access token" in quota["note"].lower()

    # An agent's token reads its own agent only; an agent without Instagram has no quota.
    made = await w.http.post(
        f"{w.url}/tokens", json={"name": "lumen", "agent_id": w.agent_id}, headers=ADMIN_HEADERS
    )
    mine = {"Authorization": f"Bearer {made.json()['token']}"}
    assert (await _quota(w, mine))["client"] == "instagram"
    other = await w.http.post(
        f"{w.url}/agents", json={"name": "Quiet", "bio": ["No posts."]}, headers=ADMIN_HEADERS
    )
    other_id = other.json()["id"]
    refused = await w.http.get(f"{w.url}/agents/{other_id}/quotas", headers=mine)
    assert refused.status_code == 403 and "scoped to agent" in refused.json()["message"]
    listed = await w.http.get(f"{w.url}/agents/{other_id}/quotas", headers=ADMIN_HEADERS)
    assert listed.status_code == 200 and listed.json() == []


async def test_a_drafts_preview_is_the_image_as_it_will_be_uploaded(
    make_world: Callable[..., Any], tmp_path: Path
) -> None:
    w: World = await make_world(fit="crop")
    wide = make_image(tmp_path / "lib" / "dusk.png", size=(1600, 600), fmt="PNG")
    square = make_image(tmp_path / "lib" / "pier.jpg", size=(1080, 1080))
    tiny = make_image(tmp_path / "lib" / "speck.jpg", size=(90, 90))
    video = tmp_path / "lib" / "tide.mp4"
    video.write_bytes(b"\x00" * 64)
    media = [str(wide), str(square), str(tiny), str(video), str(tmp_path / "gone.jpg")]
    draft = {"caption": "dusk", "media": media, "kind": "carousel"}
    job = await w.jobs.enqueue("instagram.publish", agent_id=w.agent_id, payload={"draft": draft})
    other = await w.jobs.enqueue("digest", agent_id=w.agent_id, payload={"draft": draft})

    def preview(index: int, job_id: str = job.id) -> Any:
        return w.http.get(f"{w.url}/jobs/{job_id}/preview/{index}", headers=ADMIN_HEADERS)

    shown = await preview(0)
    assert shown.status_code == 200, shown.text
    assert shown.headers["content-type"] == "image/jpeg"
    assert shown.headers["x-carrier-media-size"] == "1146x600"  # cropped to 1.91:1
    changes = json.loads(shown.headers["x-carrier-media-changes"])
    assert "cropped aspect ratio 2.67:1 to 1.91:1" in changes
    assert json.loads(shown.headers["x-carrier-media-name"]) == "dusk.png"
    assert Image.open(io.BytesIO(shown.content)).size == (1146, 600)
    # Byte for byte what the publisher uploads (the same conversion, the same encoder).
    config = parse_config({"publisher": "graph", "fit": "crop"})
    post = Post(key="k", kind=PostKind.PHOTO, media=[wide])
    prepared = prepare_post(post, tmp_path / "out", config)
    assert shown.content == prepared.images[0].path.read_bytes()

    square_shown = await preview(1)
    assert square_shown.status_code == 200
    assert json.loads(square_shown.headers["x-carrier-media-changes"]) == []
    assert square_shown.content == square.read_bytes()  # conforming: sent as it is

    refused = await preview(2)
    assert refused.status_code == 422 and refused.json()["error"] == "media_refused"
    assert "Instagram would refuse speck.jpg" in refused.json()["message"]
    assert "reject this draft" in refused.json()["message"]
    for index, says in ((3, "is a video"), (4, "is gone from the server"), (5, "no media number")):
        missing = await preview(index)
        assert missing.status_code == 404, index
        assert missing.json()["error"] == "no_media" and says in missing.json()["message"]
    unknown = await preview(0, other.id)
    assert unknown.status_code == 404 and unknown.json()["error"] == "no_preview"
    assert f"/jobs/{other.id}/media/0" in unknown.json()["message"]

    # Another agent's token does not see this agent's drafts.
    quiet = await w.http.post(
        f"{w.url}/agents", json={"name": "Quiet", "bio": ["No posts."]}, headers=ADMIN_HEADERS
    )
    made = await w.http.post(
        f"{w.url}/tokens",
        json={"name": "quiet", "agent_id": quiet.json()["id"]},
        headers=ADMIN_HEADERS,
    )
    theirs = {"Authorization": f"Bearer {made.json()['token']}"}
    refused = await w.http.get(f"{w.url}/jobs/{job.id}/preview/0", headers=theirs)
    assert refused.status_code == 403 and "scoped to agent" in refused.json()["message"]
