"""``carrier doctor`` checks for a persona's Instagram account (the ``carrier.doctor`` entry point).

The configuration is parsed and secrets resolved as the client does (:func:`parse_config`,
``Character.resolve_secret``), with every missing secret named at once. Then, for the Graph API
publisher: the token may read the account (``GET /{ig-user-id}``), the publishing quota is readable
(``GET /{ig-user-id}/content_publishing_limit``), the FTP host takes a login, and its public URL
serves what is uploaded (a small probe image is uploaded, fetched through ``ftp.baseUrl`` and
compared byte for byte, then deleted) — the path every post takes to Instagram. For instagrapi:
the package is there, the login secrets are set, and whether a saved session exists and can be
decrypted; it never logs in (a login from a new place can trigger Instagram's checks). Last,
how comments and DMs would reach the persona (webhook secrets set, or the poller on), when
either is set up, and a warning for each setting the backend serves otherwise (instagrapi cannot
hide a comment: such a rule flags it).
"""

from __future__ import annotations

import base64
import importlib.util
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from carrier.doctor.base import ClientTarget, Result, fail, ok, skip, warn
from carrier.errors import ConfigError
from carrier.install import install_hint
from clients.instagram.config import InstagramConfig, parse_config

__all__ = ["check"]

INSTALL = install_hint("the Instagram client's packages")

# A 1x1 transparent PNG: an image (as Instagram wants from the media host) of 70 bytes.
PROBE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def _missing(target: ClientTarget, names: Sequence[str], why: str) -> Result | None:
    """One failure naming every secret in ``names`` that is not set, or None."""
    unset = [target.secret_var(n) for n in names if not target.secret(n)]
    if not unset:
        return None
    refs = ", ".join(f"settings.secrets.{n}: ${target.secret_var(n)}" for n in names)
    return fail(
        "instagram secrets",
        f"{' and '.join(unset)} {'is' if len(unset) == 1 else 'are'} not set ({why})",
        f"put {'it' if len(unset) == 1 else 'them'} in the environment or .env, referenced in "
        f"the character as {refs}",
    )


async def check(target: ClientTarget) -> Sequence[Result]:
    try:
        config = parse_config(target.config)
    except ConfigError as exc:
        return [
            fail(
                "instagram config",
                str(exc).replace("\n", " "),
                "fix clientConfig.instagram in the character (carrier validate shows every problem)",
            )
        ]
    # Short network timeouts: a check, not a publish.
    config = config.model_copy(
        update={"request_timeout": min(config.request_timeout, target.timeout)}
    )
    results = await (_instagrapi if config.publisher == "instagrapi" else _graph)(target, config)
    talk = _conversations(target, config)
    return [*results, *([] if talk is None else [talk]), *_fallbacks(target, config)]


def _fallbacks(target: ClientTarget, config: InstagramConfig) -> list[Result]:
    """A warning per configured setting the backend serves otherwise (a hide that flags)."""
    from clients.instagram.inbound.backends import fallbacks
    from clients.instagram.inbound.webhook import APP_SECRET_ENV, VERIFY_TOKEN_ENV

    webhooks = all(target.environ.get(v) for v in (APP_SECRET_ENV, VERIFY_TOKEN_ENV))
    return [
        warn("instagram backend", sentence, "change the setting named, or accept the fallback")
        for sentence in fallbacks(config, webhooks=webhooks)
    ]


def _conversations(target: ClientTarget, config: InstagramConfig) -> Result | None:
    """How comments and DMs reach the persona: webhooks (their secrets set), or the poller.
    Said when the operator set either up (a ``conversations`` section, a webhook secret)."""
    from clients.instagram.inbound.webhook import APP_SECRET_ENV, VERIFY_TOKEN_ENV

    set_up = "conversations" in target.config or any(
        target.environ.get(v) for v in (APP_SECRET_ENV, VERIFY_TOKEN_ENV)
    )
    if not set_up:
        return None
    name = "instagram conversations"
    talk = config.conversations
    if not talk.enabled:
        return skip(name, "off (conversations.enabled: false)")
    if talk.poll.enabled:
        return ok(name, f"polled every {talk.poll.interval:g} s")
    if config.publisher == "instagrapi":
        return skip(
            name,
            "not received: instagrapi has no webhooks; turn on conversations.poll to answer "
            "comments and DMs",
        )
    unset = [v for v in (APP_SECRET_ENV, VERIFY_TOKEN_ENV) if not target.environ.get(v)]
    if unset:
        return skip(
            name,
            f"not received by webhook: {' and '.join(unset)} not set (the Meta app's secret and "
            "the webhook's verify token); set them, or turn on conversations.poll",
        )
    return ok(name, "by webhook at /webhooks/instagram (app secret and verify token set)")


# -- Graph API + FTP ------------------------------------------------------------------------------


async def _graph(target: ClientTarget, config: InstagramConfig) -> list[Result]:
    if config.ftp is None:
        return [
            fail(
                "instagram config",
                "clientConfig.instagram.ftp is missing: the Graph API publisher needs a media host "
                "(Instagram fetches media by public URL)",
                "add an ftp section (host, user, directory, baseUrl), or set publisher: instagrapi",
            )
        ]
    for module in ("aioftp", "httpx"):
        if importlib.util.find_spec(module) is None:
            return [fail("instagram", f"{module} is not installed", INSTALL)]
    names = ["INSTAGRAM_ACCESS_TOKEN", config.ftp.password_secret]
    if not config.ig_user_id:
        names.insert(1, "INSTAGRAM_BUSINESS_ACCOUNT_ID")
    missing = _missing(target, names, "the Graph API publisher and its FTP media host need them")
    if missing is not None:
        return [missing]
    results = await _graph_api(target, config)
    results += await _media_host(target, config)
    return results


async def _graph_api(target: ClientTarget, config: InstagramConfig) -> list[Result]:
    from clients.instagram.errors import GraphAPIError
    from clients.instagram.graph import GraphAPI
    from clients.instagram.graph.api import UnclearResponse

    var = target.secret_var("INSTAGRAM_ACCESS_TOKEN")
    ig_user_id = config.ig_user_id or str(target.secret("INSTAGRAM_BUSINESS_ACCOUNT_ID"))
    api = GraphAPI(
        access_token=str(target.secret("INSTAGRAM_ACCESS_TOKEN")),
        ig_user_id=ig_user_id,
        base_url=config.graph_base_url,
        version=config.graph_api_version,
        timeout=config.request_timeout,
    )
    unreachable = f"check this machine's connection to {config.graph_base_url}"
    try:
        try:
            account = await api.account()
        except GraphAPIError as exc:
            if exc.code == 190:
                fix = (
                    f"make a new long-lived token (with instagram_basic and "
                    f"instagram_content_publish) and set {var}"
                )
                return [
                    fail(
                        "instagram token", f"the Graph API rejected the token in {var}: {exc}", fix
                    ),
                    skip("instagram quota", "needs an accepted token"),
                ]
            return [
                fail(
                    "instagram token",
                    f"the token in {var} cannot read account {ig_user_id}: {exc}",
                    "check igUserId (or INSTAGRAM_BUSINESS_ACCOUNT_ID) and that the token was "
                    "made for that professional account",
                ),
                skip("instagram quota", "needs a readable account"),
            ]
        except UnclearResponse as exc:
            return [fail("instagram token", f"the Graph API did not answer: {exc}", unreachable)]
        who = f"@{account['username']}" if account.get("username") else f"account {ig_user_id}"
        results = [ok("instagram token", f"accepted for {who}")]
        try:
            limit = await api.publishing_limit()
        except (GraphAPIError, UnclearResponse) as exc:
            results.append(
                fail(
                    "instagram quota",
                    f"the publishing quota cannot be read: {exc}",
                    "give the token the instagram_content_publish permission",
                )
            )
            return results
        total = limit.total if limit.total is not None else "?"
        used = f"{limit.usage} of {total} posts used in the last 24 h"
        if limit.total is not None and limit.usage >= limit.total:
            results.append(
                warn("instagram quota", f"{used}: posts wait until it frees up", "post less often")
            )
        else:
            results.append(ok("instagram quota", used))
        return results
    finally:
        await api.aclose()


async def _media_host(target: ClientTarget, config: InstagramConfig) -> list[Result]:
    import aioftp

    from clients.instagram.errors import MediaHostError
    from clients.instagram.ftp import FtpMediaHost

    ftp = config.ftp
    assert ftp is not None
    host = FtpMediaHost.from_settings(
        ftp,
        user=target.secret("FTP_USER"),
        password=str(target.secret(ftp.password_secret)),
        timeout=config.request_timeout,
    )
    where = f"ftp://{host.user}@{ftp.host}:{ftp.port}"
    password_var = target.secret_var(ftp.password_secret)
    try:
        async with aioftp.Client.context(
            ftp.host,
            ftp.port,
            user=host.user,
            password=str(target.secret(ftp.password_secret)),
            upgrade_to_tls=ftp.tls,
            socket_timeout=config.request_timeout,
            connection_timeout=config.request_timeout,
        ):
            pass
    except aioftp.StatusCodeError as exc:
        answered = ", ".join(str(code) for code in exc.received_codes)
        return [
            fail(
                "instagram FTP",
                f"{where} refused the login (answered {answered})",
                f"check ftp.user (or FTP_USER) and the password in {password_var}",
            ),
            skip("instagram media URL", "needs an FTP login"),
        ]
    except (OSError, TimeoutError) as exc:
        return [
            fail(
                "instagram FTP",
                f"cannot connect to {where} ({type(exc).__name__}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc})",
                "check ftp.host and ftp.port, that the FTP server runs, and that it accepts "
                "connections from this machine" + (" over TLS (ftp.tls)" if ftp.tls else ""),
            ),
            skip("instagram media URL", "needs an FTP login"),
        ]
    results = [ok("instagram FTP", f"{where} takes the login")]
    with tempfile.TemporaryDirectory(prefix="carrier-doctor-") as folder:
        probe = Path(folder) / "probe.png"
        probe.write_bytes(PROBE)
        try:
            hosted = await host.upload(probe, slug="carrier-doctor-probe", content_type="image/png")
        except MediaHostError as exc:
            results.append(
                fail(
                    "instagram media URL",
                    f"a probe file could not be uploaded: {exc}",
                    f"give {host.user} write access to ftp.directory ({ftp.directory})",
                )
            )
            return results
    try:
        problem = await _served(hosted.url, config.request_timeout)
    finally:
        deleted = await host.delete(hosted)
    if problem:
        results.append(
            fail(
                "instagram media URL",
                f"{hosted.url} {problem}",
                f"ftp.baseUrl ({ftp.base_url}) must serve ftp.directory ({ftp.directory}) over "
                "public HTTP(S): Instagram downloads every post's media from there",
            )
        )
    else:
        results.append(ok("instagram media URL", f"{ftp.base_url} serves what is uploaded"))
    if not deleted:
        results.append(
            warn(
                "instagram media URL",
                f"the probe {hosted.remote_path} could not be deleted",
                f"delete it by hand, and give {host.user} delete rights in {ftp.directory}",
            )
        )
    return results


async def _served(url: str, wait: float) -> str | None:
    """None when ``url`` answers 200 with the probe's bytes as an image; else what it did."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=wait, follow_redirects=True) as http:
            response = await http.get(url)
    except httpx.HTTPError as exc:
        return f"could not be fetched ({type(exc).__name__})"
    if response.status_code != 200:
        return f"answered HTTP {response.status_code} to the uploaded probe"
    if response.content != PROBE:
        return "answered 200, but not with the file just uploaded"
    kind = response.headers.get("content-type", "")
    if not kind.startswith("image/"):
        return f"serves the probe image as {kind or 'no content type'!r}, not image/*"
    return None


# -- instagrapi -----------------------------------------------------------------------------------


async def _instagrapi(target: ClientTarget, config: InstagramConfig) -> list[Result]:
    if importlib.util.find_spec("instagrapi") is None:
        return [fail("instagram", "instagrapi is not installed", INSTALL)]
    missing = _missing(
        target,
        ["INSTAGRAM_USERNAME", "INSTAGRAM_PASSWORD"],
        "the instagrapi publisher logs in with the account's username and password",
    )
    if missing is not None:
        return [missing]
    results = [ok("instagram secrets", "username and password are set (not tried: no login)")]
    if target.store is None:
        results.append(skip("instagram session", "the store could not be opened as it is"))
        return results
    results += await _session(target, str(target.secret("INSTAGRAM_USERNAME")))
    return results


async def _session(target: ClientTarget, username: str) -> list[Result]:
    from clients.instagram.factory import fernet_key_from_secret
    from clients.instagram.private.session import Cooldown, SessionVault

    store: Any = target.store
    agent_id = str(target.character.agent_id)
    key = fernet_key_from_secret(target.environ["CARRIER_SECRET_KEY"])
    vault = SessionVault(store, agent_id, username, key)
    results = []
    if not await store.get_setting(vault.key):
        results.append(
            ok("instagram session", "none saved yet: the first post logs in with the password")
        )
    elif await vault.load() is None:
        results.append(
            warn(
                "instagram session",
                "a saved session exists but cannot be decrypted with this CARRIER_SECRET_KEY "
                "(was the key changed?): the next post logs in afresh",
                "restore the CARRIER_SECRET_KEY it was saved with, or let it log in again",
            )
        )
    else:
        results.append(ok("instagram session", "a saved session exists and can be read"))
    cooling = await Cooldown(store, agent_id, username).until()
    if cooling is not None:
        until, reason = cooling
        results.append(
            warn(
                "instagram cooldown",
                f"Instagram throttled the account ({reason}); posts wait until {until.isoformat()}",
                "nothing to do but wait; posting less often avoids it",
            )
        )
    return results
