"""``carrier doctor``: check a deployment end to end and say how to fix what fails.

The data dir, the store, the API port, and for each persona its model and its clients'
credentials (the adapters' checks, found through the ``carrier.doctor`` entry points). See
:mod:`carrier.doctor.base` for what a check returns and what an adapter's check is given, and
:func:`run_doctor` for the order.
"""

from carrier.doctor.base import ClientCheck, ClientTarget, Result, Status, fail, ok, skip, warn
from carrier.doctor.runner import Report, run_doctor

__all__ = [
    "ClientCheck",
    "ClientTarget",
    "Report",
    "Result",
    "Status",
    "fail",
    "ok",
    "run_doctor",
    "skip",
    "warn",
]
