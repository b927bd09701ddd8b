"""Characters: the persona model and its loaders.

Load a persona with :func:`load_character` (ElizaOS v0.1.x / v1.x JSON, YAML, Character Card
V2/V3 JSON or PNG); problems come back together in one
:class:`~carrier.errors.CharacterError`. :func:`check_paths` and :func:`lint_file` also give
warnings: what loads but will not act as written (an unknown client, a value cut by a YAML
comment, ...). Secrets in a character are environment references
(``"$OPENAI_API_KEY"``), resolved with :meth:`Character.resolve_secret`.
"""

from carrier.character.cards import card_to_character_data, character_to_card, write_card_png
from carrier.character.dump import character_data, dump_character, dumps_character
from carrier.character.lint import (
    CharacterWarning,
    FileReport,
    check_paths,
    lint_character,
    lint_file,
    lint_yaml,
)
from carrier.character.loader import (
    CHARACTER_SUFFIXES,
    find_character_files,
    import_card,
    load_character,
    load_character_text,
    parse_character,
    validate_paths,
)
from carrier.character.model import Character, ModelSettings
from carrier.character.parts import (
    CharacterSettings,
    ExampleContent,
    KnowledgeDirectory,
    KnowledgeFile,
    KnowledgeItem,
    LoreEntry,
    MessageExample,
    Style,
)
from carrier.character.secrets import (
    SecretRef,
    find_secret_problems,
    is_secret_name,
    parse_secret_ref,
)

__all__ = [
    "CHARACTER_SUFFIXES",
    "Character",
    "CharacterSettings",
    "CharacterWarning",
    "ExampleContent",
    "FileReport",
    "KnowledgeDirectory",
    "KnowledgeFile",
    "KnowledgeItem",
    "LoreEntry",
    "MessageExample",
    "ModelSettings",
    "SecretRef",
    "Style",
    "card_to_character_data",
    "character_data",
    "character_to_card",
    "check_paths",
    "dump_character",
    "dumps_character",
    "find_character_files",
    "find_secret_problems",
    "import_card",
    "is_secret_name",
    "lint_character",
    "lint_file",
    "lint_yaml",
    "load_character",
    "load_character_text",
    "parse_character",
    "parse_secret_ref",
    "validate_paths",
    "write_card_png",
]
