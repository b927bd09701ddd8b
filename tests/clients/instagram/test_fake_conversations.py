"""The fake Graph API's conversations, over real HTTP: replies, hides, mentions, DMs inside and
outside the messaging window, and signed webhook deliveries with retries and duplicates."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

import httpx
import pytest

from clients.instagram.fake import FakeGraphAPI
from tests.clients.instagram.helpers import TOKEN


@pytest.fixture
async def http(fake_graph: FakeGraphAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=f"{fake_graph.url}/v21.0", headers={"Authorization": f"Bearer {TOKEN}"}
    ) as client:
        yield client


async def test_fake_comment_replies_hide_and_mentions(
    fake_graph: FakeGraphAPI, http: httpx.AsyncClient
) -> None:
    talk = fake_graph.conversations
    media = fake_graph.add_media("fog at six")
    comment = talk.person_comments(media, "what film is this?", user_id="u1", username="ana")

    listed = (await http.get(f"/{media}/comments")).json()["data"]
    assert [c["id"] for c in listed] == [comment.id]
    assert listed[0]["from"] == {"id": "u1", "username": "ana"}

    reply = (await http.post(f"/{comment.id}/replies", data={"message": "portra 400"})).json()
    replies = (await http.get(f"/{comment.id}/replies")).json()["data"]
    assert [r["id"] for r in replies] == [reply["id"]] and replies[0]["text"] == "portra 400"
    assert [r.text for r in talk.replies_to(comment.id)] == ["portra 400"]

    assert (await http.post(f"/{comment.id}", data={"hide": "true"})).json() == {"success": True}
    assert (await http.get(f"/{comment.id}")).json()["hidden"] is True

    mention = talk.person_mentions("@fake_account look at this", user_id="u2", username="bo")
    fields = f"mentioned_comment.comment_id({mention.id}){{id,text,replies}}"
    found = (await http.get(f"/{fake_graph.ig_user_id}", params={"fields": fields})).json()
    assert found["mentioned_comment"]["text"] == "@fake_account look at this"
    data = {"comment_id": mention.id, "media_id": mention.media_id, "message": "thank you"}
    assert (await http.post(f"/{fake_graph.ig_user_id}/mentions", data=data)).status_code == 200
    assert [r.text for r in talk.replies_to(mention.id)] == ["thank you"]


async def test_fake_direct_messages_keep_the_24_hour_window(
    fake_graph: FakeGraphAPI, http: httpx.AsyncClient
) -> None:
    talk = fake_graph.conversations
    talk.person_messages("hi!", user_id="u1", username="ana")
    talk.person_messages(
        "hello?", user_id="u2", username="bo", at=datetime.now(UTC) - timedelta(hours=25)
    )
    me = fake_graph.ig_user_id

    inside = await http.post(
        f"/{me}/messages", json={"recipient": {"id": "u1"}, "message": {"text": "hey ana"}}
    )
    assert inside.status_code == 200 and inside.json()["recipient_id"] == "u1"
    outside = await http.post(
        f"/{me}/messages", json={"recipient": {"id": "u2"}, "message": {"text": "hey bo"}}
    )
    error = outside.json()["error"]
    assert outside.status_code == 400
    assert (error["code"], error["error_subcode"]) == (10, 2534022)
    assert error["message"] == "This message is sent outside of allowed window."
    assert [m.text for m in talk.thread_with("u2")] == ["hello?"]

    [conversation] = (await http.get(f"/{me}/conversations", params={"user_id": "u1"})).json()[
        "data"
    ]
    thread = (await http.get(f"/{conversation['id']}", params={"fields": "messages"})).json()
    assert [m["message"] for m in thread["messages"]["data"]] == ["hey ana", "hi!"]


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, bytes]] = []
    answers: list[int] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.seen.append((self.headers.get("x-hub-signature-256", ""), body))
        status = self.answers.pop(0) if self.answers else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


async def test_fake_webhooks_are_signed_retried_and_duplicated(fake_graph: FakeGraphAPI) -> None:
    handler = type("Handler", (_Recorder,), {"seen": [], "answers": [500]})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        fake_graph.webhooks.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        media = fake_graph.add_media()
        comment = fake_graph.conversations.person_comments(
            media, "love it", user_id="u1", username="ana"
        )
        statuses = await fake_graph.webhooks.deliver(fake_graph.webhooks.comment(comment), times=2)
    finally:
        server.shutdown()
        server.server_close()
    assert statuses == [500, 200, 200]  # the refused delivery retried, then a duplicate
    for signature, body in handler.seen:
        expected = hmac.new(b"fake-app-secret", body, hashlib.sha256).hexdigest()
        assert signature == f"sha256={expected}"
    change = json.loads(handler.seen[0][1])["entry"][0]["changes"][0]
    assert change["field"] == "comments" and change["value"]["id"] == comment.id
    assert change["value"]["from"] == {"id": "u1", "username": "ana"}
