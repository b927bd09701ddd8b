"""``carrier.agents.diff``: field paths, list edits as a text diff sees them, secrets masked."""

from __future__ import annotations

from typing import Any

from carrier.agents.diff import SECRET, diff_characters, mask_secrets

OLD: dict[str, Any] = {
    "name": "Harbor",
    "bio": ["one", "two", "three"],
    "style": {"chat": ["short"], "all": ["kind"]},
    "settings": {"secrets": {"DISCORD_API_TOKEN": "$HARBOR_TOKEN"}, "model": "openai/gpt-4o"},
    "clientConfig": {"discord": {"channels": ["1"], "apiToken": "$HARBOR_TOKEN"}},
}


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    return [(c.path, c.kind.value, c.old, c.new) for c in diff_characters(old, new).changes]


def test_diff_paths_name_keys_and_list_items() -> None:
    new = {
        **OLD,
        "bio": ["zero", "one", "two", "three!"],
        "style": {"chat": ["terse"], "all": ["kind"]},
        "clientConfig": {"discord": {"channels": ["1", "2"], "apiToken": "$HARBOR_TOKEN"}},
        "odd name": 1,
    }

    assert changes(OLD, new) == [
        ("bio[0]", "added", None, "zero"),
        ("bio[3]", "changed", "three", "three!"),
        ("style.chat[0]", "changed", "short", "terse"),
        ("clientConfig.discord.channels[1]", "added", None, "2"),
        ('["odd name"]', "added", None, 1),
    ]


def test_diff_removed_items_keep_their_old_index_and_types_count() -> None:
    new = {**OLD, "bio": ["one", "three"], "settings": {**OLD["settings"], "model": None}}
    new.pop("style")

    assert changes(OLD, new) == [
        ("bio[1]", "removed", "two", None),
        ("style", "removed", {"chat": ["short"], "all": ["kind"]}, None),
        ("settings.model", "changed", "openai/gpt-4o", None),
    ]
    assert changes({"a": 1}, {"a": True}) == [("a", "changed", 1, True)]
    assert diff_characters(OLD, dict(reversed(list(OLD.items())))).identical


def test_diff_names_a_changed_secret_reference_and_never_shows_one() -> None:
    new = {
        **OLD,
        "settings": {"secrets": {"DISCORD_API_TOKEN": "$OTHER_TOKEN"}, "model": "openai/gpt-4o"},
        "clientConfig": {"discord": {"channels": ["1"], "apiToken": "$OTHER_TOKEN"}},
        "secrets": {"OPENAI_API_KEY": "$NEW_KEY"},
    }

    diff = diff_characters(OLD, new, old_label="revision 1", new_label="revision 2")

    assert [(c.path, c.kind.value, c.secret, c.old, c.new) for c in diff.changes] == [
        ("settings.secrets.DISCORD_API_TOKEN", "changed", True, SECRET, SECRET),
        ("clientConfig.discord.apiToken", "changed", True, SECRET, SECRET),
        ("secrets", "added", True, None, {"OPENAI_API_KEY": SECRET}),
    ]
    assert "-    DISCORD_API_TOKEN: (secret reference, not shown)\n" in diff.text
    assert "+    DISCORD_API_TOKEN: (secret reference, changed; not shown)\n" in diff.text
    assert "+  OPENAI_API_KEY: (secret reference, not shown)\n" in diff.text
    for ref in ("HARBOR_TOKEN", "OTHER_TOKEN", "NEW_KEY"):
        assert ref not in diff.text and ref not in repr(diff.changes)


def test_diff_from_nothing_and_mask_secrets_keeps_the_names() -> None:
    first = diff_characters({}, OLD, old_label="(none)", new_label="revision 1")
    assert {c.kind.value for c in first.changes} == {"added"}
    assert first.text.startswith("--- (none)\n+++ revision 1\n")
    assert "HARBOR_TOKEN" not in first.text

    masked = mask_secrets(OLD)
    assert masked["settings"] == {
        "secrets": {"DISCORD_API_TOKEN": SECRET},
        "model": "openai/gpt-4o",
    }
    assert masked["clientConfig"]["discord"] == {"channels": ["1"], "apiToken": SECRET}
    assert OLD["settings"]["secrets"]["DISCORD_API_TOKEN"] == "$HARBOR_TOKEN"  # a copy
    assert diff_characters(OLD, OLD).text == ""
