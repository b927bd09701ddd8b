"""Switching stores is one setting: the same chat runs on MongoDB when CARRIER_MONGODB_URI is set.
(With the hashing embedder: the claim is about the store; tests/test_cli.py runs the real model.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli import carrier


@pytest.mark.slow
def test_mongo_chat_remembers_across_runs(tmp_path: Path, mongo_compatible_server) -> None:  # type: ignore[no-untyped-def]
    uri = mongo_compatible_server.database_uri("carrier_e2e")
    env = {"CARRIER_MONGODB_URI": uri}
    first = carrier(
        "chat",
        "characters/harbor.yaml",
        data_dir=tmp_path,
        stdin="who are you?\n",
        env=env,
        hashing=True,
    )
    assert first.returncode == 0, first.stderr
    second = carrier(
        "chat",
        "characters/harbor.yaml",
        data_dir=tmp_path,
        stdin="who are you?\n",
        env=env,
        hashing=True,
    )
    assert second.returncode == 0, second.stderr
    assert 'You asked me this before ("who are you?"' in second.stdout
    assert not (tmp_path / "carrier.db").exists()  # nothing went to the embedded store
