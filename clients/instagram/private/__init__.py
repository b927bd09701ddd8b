"""The instagrapi publisher (Instagram's private API; the alternative to the Graph API)."""

from __future__ import annotations

from clients.instagram.private.publisher import InstagrapiPublisher, default_client_factory
from clients.instagram.private.session import Cooldown, SessionVault, as_fernet

__all__ = ["Cooldown", "InstagrapiPublisher", "SessionVault", "as_fernet", "default_client_factory"]
