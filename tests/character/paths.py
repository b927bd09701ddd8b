"""Helpers for character tests: where the shared ElizaOS fixtures and example personas live."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHARACTERS = REPO / "characters"
ELIZA_FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "elizaos-characters"


def eliza_fixture_files() -> list[Path]:
    """Every ElizaOS character file in the shared fixtures (empty when they are not checked out)."""
    if not ELIZA_FIXTURES.is_dir():
        return []
    return sorted(p for p in ELIZA_FIXTURES.rglob("*.json") if p.is_file())
