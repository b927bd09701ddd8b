"""A stand-in for Instagram's private API, under instagrapi's own HTTP sessions, so instagrapi
runs unchanged: its CAA login, its session checks, its uploads and its error mapping all happen
for real, against this world.

``FakeInstagram.client_factory()`` builds ``instagrapi.Client`` instances wired to the world in
this process (a ``requests`` transport adapter); ``FakeInstagram.serve()`` serves it over
loopback HTTP for instagrapi in another process (:mod:`~clients.instagram.fake.private_http`).
Scripted outcomes: a challenge, two-factor, a wrong password, throttling on the next request
to an endpoint, an expired session (the server forgets it), a dropped connection. Comments and
direct threads are :attr:`FakeInstagram.talk`.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import instagrapi
import requests
from Cryptodome.Cipher import AES, PKCS1_v1_5
from Cryptodome.PublicKey import RSA
from requests.models import PreparedRequest

from clients.instagram.fake._private_talk import PrivateTalk
from clients.instagram.fake._requests import WorldAdapter, form_fields
from clients.instagram.fake.private_http import PrivateServer

__all__ = ["FakeInstagram"]

_LOGIN = "com.bloks.www.bloks.caa.login.async.send_login_request"
_THROTTLES: dict[str, tuple[int, dict[str, Any]]] = {
    "please_wait": (
        400,
        {"message": "Please wait a few minutes before you try again.", "status": "fail"},
    ),
    "feedback_required": (
        400,
        {
            "message": "feedback_required",
            "feedback_message": "We restrict certain activity to protect our community.",
            "status": "fail",
        },
    ),
    "rate_limit": (
        400,
        {"message": "rate limited", "error_type": "rate_limit_error", "status": "fail"},
    ),
    "login_required": (403, {"message": "login_required", "status": "fail", "logout_reason": 3}),
    "drop": (0, {}),
    "drop_after": (0, {}),
}


@dataclass
class FakeInstagram:
    """One Instagram account (``username``/``password``) and what happened to it."""

    username: str = "lumen.on.film"
    password: str = "correct horse"
    user_id: str = "5550001"
    login_outcome: str = "ok"
    """``ok``, ``challenge``, ``two_factor`` (unless the right ``totp_code`` is sent)."""
    totp_code: str | None = None
    sessions: set[str] = field(default_factory=set)
    media: list[dict[str, Any]] = field(default_factory=list)
    password_logins: int = 0
    requests: list[str] = field(default_factory=list)
    fail_next: dict[str, str] = field(default_factory=dict)
    """endpoint fragment → a key of the throttle table, applied once to the next matching call."""
    talk: PrivateTalk = field(init=False)
    """Comments and direct threads (:mod:`~clients.instagram.fake._private_talk`)."""

    def __post_init__(self) -> None:
        self.talk = PrivateTalk(owner_id=self.user_id, owner_username=self.username)
        self._key = _password_key()
        self._ids = itertools.count(3300000000000000001)
        self._lock = threading.Lock()

    # -- for tests -----------------------------------------------------------------------------
    def expire_sessions(self) -> None:
        """The server forgets every session (as when Instagram logs a device out)."""
        self.sessions.clear()

    def client_factory(self, **kwargs: Any) -> instagrapi.Client:
        """An ``instagrapi.Client`` whose every HTTP request is answered by this world."""
        world = self

        class Client(instagrapi.Client):
            def _configure_private_session_retry(self, private_transport: Any = None) -> None:
                world._mount(self)

            def _configure_public_session_retry(self) -> None:
                world._mount(self)

        kwargs.setdefault("request_timeout", 0)
        kwargs.setdefault("private_transport", "requests")
        kwargs.setdefault("with_challenge_flow", False)
        client = Client(**kwargs)
        world._mount(client)
        return client

    def serve(self) -> PrivateServer:
        """This world over loopback HTTP, for instagrapi in another process (a real ``carrier``
        started with ``CARRIER_TEST_INSTAGRAPI_URL``): ``with ig.serve() as url: ...``."""
        return PrivateServer(self)

    def _mount(self, client: Any) -> None:
        for name in ("private", "public", "graphql"):
            session = getattr(client, name, None)
            if isinstance(session, requests.Session):
                adapter = WorldAdapter(self)
                session.mount("https://", adapter)
                session.mount("http://", adapter)

    def add_media(self, caption: str = "") -> str:
        """A photo already on the account; its media id (``<pk>_<user id>``)."""
        with self._lock:
            pk = str(next(self._ids))
            self.media.append(
                {
                    "pk": pk,
                    "id": f"{pk}_{self.user_id}",
                    "code": f"FAKE{pk[-6:]}",
                    "taken_at": int(time.time()),
                    "media_type": 1,
                    "product_type": "feed",
                    "caption": {"text": caption},
                    "user": {"pk": self.user_id, "username": self.username},
                    "like_count": 0,
                }
            )
            return f"{pk}_{self.user_id}"

    # -- the API -------------------------------------------------------------------------------
    def answer(self, request: PreparedRequest) -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, JSON body, headers); status 0 means the connection dropped. A reply or DM
        that took effect answers after :attr:`PrivateTalk.answer_delay_s`."""
        path = urlsplit(request.url or "").path
        talk = self.talk
        with self._lock:
            sent = talk.sends
            answer = self._faulty_or_answer(request, path)
            held = talk.sends > sent and talk.answer_delay_s > 0
            talk.answering += held
        if held:
            start = time.monotonic()
            try:  # held until the delay passes, or a test sets it to 0
                while time.monotonic() - start < talk.answer_delay_s:
                    time.sleep(0.02)
            finally:
                with self._lock:
                    talk.answering -= 1
        return answer

    def _faulty_or_answer(
        self, request: PreparedRequest, path: str
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        self.requests.append(f"{request.method} {path}")
        for fragment, fault in list(self.fail_next.items()):
            if fragment in path:
                del self.fail_next[fragment]
                if fault == "drop_after":  # the request takes effect, the answer is lost
                    self._answer(request, path)
                status, body = _THROTTLES[fault]
                return status, dict(body), {}
        return self._answer(request, path)

    def _answer(
        self, request: PreparedRequest, path: str
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        form = form_fields(request)
        if path == "/graphql_www":
            return 200, {"data": {"xdt_usdid_registration": {"success": True}}}, {}
        if path == "/api/v1/qe/sync/":
            pem = self._key.publickey().export_key()
            return (
                200,
                {"status": "ok"},
                {
                    "ig-set-password-encryption-key-id": "41",
                    "ig-set-password-encryption-pub-key": base64.b64encode(pem).decode(),
                },
            )
        if path.endswith("process_client_data_and_redirect/"):
            node = {"data": {"key": "CAA_ACCOUNT_ACCESS_CONTEXT:aac", "initial": "fake-aac"}}
            return 200, {"layout": {"bloks_payload": {"data": [node]}}, "status": "ok"}, {}
        if path.endswith("attestation/create_android_keystore/"):
            return 200, {"challenge_nonce": "nonce", "key_nonce": "key", "status": "ok"}, {}
        if path.endswith(f"{_LOGIN}/"):
            return self._login(json.loads(form.get("params", "{}")))
        if "/bloks/async_action/" in path or path.endswith(
            ("/feed/reels_tray/", "/feed/timeline/")
        ):
            return 200, {"status": "ok", "feed_items": [], "tray": []}, {}
        if path.startswith(("/rupload_igphoto/", "/rupload_igvideo/", "/upload_settings/")):
            return (
                200,
                {"status": "ok", "upload_id": request.headers.get("X-Entity-Name", "")},
                {},
            )
        if not self._authorized(request):
            return 403, {"message": "login_required", "status": "fail", "logout_reason": 2}, {}
        if path == "/api/v1/accounts/current_user/":
            return 200, {"user": self._account(), "status": "ok"}, {}
        if path.startswith(f"/api/v1/feed/user/{self.user_id}/"):
            items = list(reversed(self.media))
            return 200, {"items": items, "more_available": False, "status": "ok"}, {}
        if path.startswith("/api/v1/media/configure"):
            return self._configure(path, form)
        talked = self.talk.answer(request.method or "GET", path, form)
        if talked is not None:
            return talked[0], talked[1], {}
        return 404, {"message": f"fake Instagram has no {path}", "status": "fail"}, {}

    def _login(self, params: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        entered = self._decrypt(params.get("client_input_params", {}).get("password", ""))
        if entered != self.password:
            return (
                400,
                {
                    "message": "The password you entered is incorrect.",
                    "error_type": "bad_password",
                    "status": "fail",
                },
                {},
            )
        if self.login_outcome == "challenge":
            return (
                400,
                {
                    "message": "challenge_required",
                    "challenge": {
                        "url": "https://i.instagram.com/challenge/",
                        "api_path": "/challenge/",
                    },
                    "status": "fail",
                },
                {},
            )
        if self.login_outcome == "two_factor":
            return (
                400,
                {
                    "message": "",
                    "two_factor_required": True,
                    "two_factor_info": {
                        "two_factor_identifier": "2fa-id",
                        "username": self.username,
                    },
                    "error_type": "two_factor_required",
                    "status": "fail",
                },
                {},
            )
        self.password_logins += 1
        session = f"sess-{next(self._ids)}"
        self.sessions.add(session)
        auth = {
            "ds_user_id": self.user_id,
            "sessionid": session,
            "should_use_header_over_cookies": True,
        }
        token = base64.b64encode(json.dumps(auth).encode()).decode()
        embedded = {
            "login_response": json.dumps(
                {"logged_in_user": {"pk": self.user_id, "username": self.username}}
            ),
            "headers": json.dumps({"IG-Set-Authorization": f"Bearer IGT:2:{token}"}),
            "cookies": f"Set-Cookie: sessionid={session}; ds_user_id={self.user_id}",
        }
        action = f"(bk.action.core.TakeLast {json.dumps(json.dumps(embedded))})"
        return 200, {"layout": {"bloks_payload": {"action": action}}, "status": "ok"}, {}

    def _decrypt(self, enc: str) -> str | None:
        try:
            _, _, timestamp, payload_b64 = enc.split(":", 3)
            payload = base64.b64decode(payload_b64)
            iv, size = payload[2:14], int.from_bytes(payload[14:16], "little")
            rsa_part, rest = payload[16 : 16 + size], payload[16 + size :]
            session_key = PKCS1_v1_5.new(self._key).decrypt(rsa_part, b"")
            if len(session_key) != 32:
                return None
            cipher = AES.new(session_key, AES.MODE_GCM, iv)
            cipher.update(timestamp.encode())
            return cipher.decrypt_and_verify(rest[16:], rest[:16]).decode()
        except (ValueError, TypeError):
            return None

    def _authorized(self, request: PreparedRequest) -> bool:
        auth = str(request.headers.get("Authorization", ""))
        if auth.startswith("Bearer IGT:2:"):
            try:
                data = json.loads(base64.b64decode(auth.rsplit(":", 1)[-1]))
            except ValueError:
                return False
            return data.get("sessionid") in self.sessions
        cookie = str(request.headers.get("Cookie", ""))
        return any(f"sessionid={s}" in cookie for s in self.sessions)

    def _account(self) -> dict[str, Any]:
        return {
            "pk": self.user_id,
            "username": self.username,
            "full_name": "Lumen",
            "is_private": False,
            "profile_pic_url": "https://instagram.example/lumen.jpg",
            "is_verified": False,
            "is_business": True,
        }

    def _configure(
        self, path: str, form: dict[str, str]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        data = json.loads(form["signed_body"].split(".", 1)[1]) if "signed_body" in form else form
        media_id = str(next(self._ids))
        kind = {"configure_sidecar": 8, "configure_to_clips": 2}.get(
            path.rstrip("/").split("/")[-1], 1
        )
        media: dict[str, Any] = {
            "pk": media_id,
            "id": f"{media_id}_{self.user_id}",
            "code": f"FAKE{media_id[-6:]}",
            "taken_at": int(time.time()),
            "media_type": kind,
            "product_type": "clips" if kind == 2 else "feed",
            "caption": {"text": data.get("caption", "")},
            "user": {"pk": self.user_id, "username": self.username},
            "like_count": 0,
        }
        if kind == 8:
            media["carousel_media"] = [
                {"pk": f"{media_id}{i}", "media_type": 1, "thumbnail_url": None}
                for i, _ in enumerate(data.get("children_metadata", []))
            ]
        self.media.append(media)
        return 200, {"media": media, "status": "ok"}, {}


@functools.cache
def _password_key() -> RSA.RsaKey:
    """The password-encryption key pair (made once: RSA generation is slow)."""
    return RSA.generate(2048)
