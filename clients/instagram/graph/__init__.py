"""The Graph API publisher (official API; media hosted on FTP)."""

from __future__ import annotations

from clients.instagram.graph.api import ContainerStatus, GraphAPI, PublishingLimit, UnclearResponse
from clients.instagram.graph.publisher import GraphPublisher

__all__ = ["ContainerStatus", "GraphAPI", "GraphPublisher", "PublishingLimit", "UnclearResponse"]
