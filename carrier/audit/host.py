"""The audit log as a host runs it (``carrier run``, ``carrier serve``): opened beside the store,
given to the agents as ``services["audit"]``, hearing the redactor, closed last::

    audit = await open_host_audit(settings, manager.services)
    try:
        ...
    finally:
        await audit.aclose()
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from carrier.audit.base import AuditLog
from carrier.audit.redactions import RedactionRecorder

if TYPE_CHECKING:
    from carrier.settings import Settings

__all__ = ["HostAudit", "open_host_audit"]


@dataclass
class HostAudit:
    log: AuditLog
    redactions: RedactionRecorder

    async def aclose(self) -> None:
        """Record the redactions heard last, then close the log."""
        try:
            await self.redactions.stop()
        finally:
            await self.log.close()


async def open_host_audit(settings: Settings, services: MutableMapping[str, Any]) -> HostAudit:
    """Open the audit log the settings name and put it in ``services["audit"]``."""
    audit = AuditLog.from_settings(settings)
    await audit.open()
    services["audit"] = audit
    redactions = RedactionRecorder(audit)
    redactions.start()
    return HostAudit(log=audit, redactions=redactions)
