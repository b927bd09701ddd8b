"""What to run when something Carrier needs is missing or too old: commands that work where this
Carrier was installed from.

Carrier installs from its source checkout (``make install``, from the lock in ``requirements/``);
the ``carrier`` name on the package index belongs to an unrelated project, so a hint never says
``pip install carrier``.
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["checkout", "install_hint", "upgrade_hint"]


@functools.cache
def checkout() -> Path | None:
    """The source checkout this Carrier runs from (an editable install), if it is one."""
    root = Path(__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file() and (root / "requirements" / "main.txt").is_file():
        return root
    return None


def install_hint(what: str) -> str:
    """How to install ``what`` (a package Carrier's lock has): the whole locked set, platform
    clients included, from the checkout."""
    root = checkout()
    if root is not None:
        return f"run `make install` in {root} (it installs {what} with the rest of the lock)"
    return (
        f"reinstall Carrier from its source checkout with `make install`, which installs {what} "
        "with the rest of the lock (requirements/main.txt)"
    )


def upgrade_hint() -> str:
    """How to get a newer Carrier."""
    root = checkout()
    where = f" in {root}" if root is not None else " in Carrier's source checkout"
    return f"upgrade Carrier (`git pull && make install`{where})"
