"""``CARRIER_SECRET_KEY``: the key that encrypts secrets Carrier must store (an instagrapi session).

When the variable is unset, a key is generated once into the data dir (readable by the owner
only) and reused, with a warning: a copied database alone then reveals nothing, but the data dir
as a whole holds both, so production setups should set the variable.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import MutableMapping
from pathlib import Path

__all__ = ["ensure_secret_key"]

log = logging.getLogger(__name__)

ENV = "CARRIER_SECRET_KEY"


def ensure_secret_key(data_dir: Path, environ: MutableMapping[str, str]) -> str:
    """The secret key from ``environ``, else from ``<data_dir>/secret.key`` (made on first use);
    puts it into ``environ`` so adapters find it there."""
    value = environ.get(ENV)
    if value:
        return value
    path = data_dir / "secret.key"
    if path.exists():
        value = path.read_text(encoding="utf-8").strip()
    if not value:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        value = secrets.token_urlsafe(48)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(value + "\n")
        log.warning(
            "%s is not set: generated a key into %s. Set %s in the environment or .env for "
            "production, so the key does not live beside the data it protects.",
            ENV,
            path,
            ENV,
        )
    environ[ENV] = value
    return value
