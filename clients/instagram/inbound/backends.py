"""What a configuration asks that its backend does otherwise, said to the operator.

The Graph API and Instagram's private API (instagrapi) do not offer the same things: the
private API cannot hide a comment or send a private reply, and the Graph API lists no mentions
(Meta names them only by webhook). Where a configured setting meets such a gap, Carrier does the
nearest thing and says so, once when the client starts (a warning in the log) and in
``carrier doctor``: :func:`fallbacks` is the one list both read.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fallbacks"]


def fallbacks(config: Any, *, webhooks: bool | None = None) -> list[str]:
    """One sentence per configured setting this backend serves otherwise (empty: none).
    ``webhooks``: whether Meta's webhooks reach the API (``None``: not known here)."""
    talk, moderation = config.conversations, config.moderation
    said: list[str] = []
    if config.publisher == "instagrapi":
        if moderation.enabled and moderation.action == "hide":
            said.append(
                "moderation.action is hide, but Instagram's private API (instagrapi) cannot "
                "hide comments: a comment a rule matches is flagged for review instead (audited, "
                "unanswered). Set moderation.action: delete to remove such comments for good, "
                "flag to keep them, or publisher: graph to hide them"
            )
        if talk.enabled and talk.reply_as == "private":
            said.append(
                "conversations.replyAs is private, but instagrapi has no private replies: a "
                "comment is answered by a plain DM to its writer, which may land in their "
                "message requests"
            )
    elif talk.enabled and talk.mentions and talk.poll.enabled and webhooks is False:
        said.append(
            "conversations.mentions is on, but the Graph API lists no mentions and its webhooks "
            "are not set up: @mentions of the persona elsewhere are not answered (the poller "
            "reads comments and DMs only)"
        )
    return said
