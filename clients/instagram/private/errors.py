"""What an instagrapi failure means for the operator, in words they can act on."""

from __future__ import annotations

from instagrapi import exceptions as ig

from clients.instagram.errors import OperatorActionRequired

__all__ = ["describe_login_failure", "throttle_reason"]


def describe_login_failure(exc: Exception, username: str, *, totp: bool) -> OperatorActionRequired:
    """The exact steps for a login Instagram will not complete on its own."""
    who = f"@{username}"
    if isinstance(exc, ig.TwoFactorRequired):
        if totp:
            return OperatorActionRequired(
                f"Instagram asked {who} for a two-factor code and the code from INSTAGRAM_TOTP_SEED "
                "was refused: check that the seed is the account's current authenticator key "
                "(Accounts Center → Password and security → Two-factor authentication), that this "
                "machine's clock is right, then start the client again."
            )
        return OperatorActionRequired(
            f"Instagram asks {who} for a two-factor code, which Carrier cannot type in. Either set "
            "INSTAGRAM_TOTP_SEED to the account's authenticator key (Instagram → Accounts Center → "
            "Password and security → Two-factor authentication → Authentication app → copy the "
            "key) and reference it in the character as settings.secrets.INSTAGRAM_TOTP_SEED, or "
            "turn two-factor authentication off for this account; then start the client again."
        )
    if isinstance(exc, ig.ChallengeError):
        return OperatorActionRequired(
            f"Instagram wants to verify that the login for {who} is really you (a security "
            "challenge). Open the Instagram app or instagram.com logged in as that account, "
            "confirm the login ('This was me') or complete the check it shows, preferably from "
            "the same network this server uses, then start the client again. Carrier will not "
            "retry until you do."
        )
    if isinstance(exc, ig.BadPassword | ig.BadCredentials):
        return OperatorActionRequired(
            f"Instagram refused the password for {who}. Set INSTAGRAM_PASSWORD (and "
            "INSTAGRAM_USERNAME) to the account's current credentials in the environment or .env; "
            "if the password is right, log in once from the Instagram app to clear the block, "
            "then start the client again."
        )
    return OperatorActionRequired(
        f"Instagram would not log {who} in ({type(exc).__name__}: {exc}). Log in once from the "
        "Instagram app, resolve anything it shows, then start the client again."
    )


def throttle_reason(exc: Exception) -> str | None:
    """A short reason when ``exc`` means 'slow down', else ``None``."""
    if isinstance(exc, ig.PleaseWaitFewMinutes):
        return "please wait a few minutes"
    if isinstance(exc, ig.FeedbackRequired):
        detail = getattr(exc, "feedback_message", "") or "action blocked"
        return f"feedback_required: {detail}"
    if isinstance(exc, ig.RateLimitError | ig.ClientThrottledError):
        return "rate limited"
    if isinstance(exc, ig.SentryBlock):
        return "sentry block (too many actions)"
    return None
