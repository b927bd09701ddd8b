"""Hints for what is missing name commands that work from this checkout."""

from __future__ import annotations

import re
from pathlib import Path

from carrier.install import checkout, install_hint, upgrade_hint

ROOT = Path(__file__).resolve().parents[1]


def test_install_hint_names_make_install_in_this_checkout() -> None:
    assert checkout() == ROOT
    hint = install_hint("discord.py")
    assert f"`make install` in {ROOT}" in hint and "discord.py" in hint
    assert re.search(r"^install:", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert f"`git pull && make install` in {ROOT}" in upgrade_hint()


def test_install_no_message_tells_users_to_pip_install_a_package() -> None:
    # `carrier` on the package index is another project, and Carrier installs from its lock:
    # a hint that says `pip install X` installs something unlocked, or the wrong thing.
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("carrier", "clients")
        for path in (ROOT / folder).rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "pip install" in line and path.name != "install.py"
    ]
    assert offenders == []
