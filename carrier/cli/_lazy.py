"""A command group whose sub-commands are imported only when they run.

``carrier --help`` lists every command from a table of names and one-line helps; the module behind
a command (and whatever heavy library it needs) is imported when that command is invoked, or when
its own ``--help`` is asked for. Adapters' command groups (the ``carrier.cli`` entry points) are
listed by name and loaded the same way; one that fails to load is reported and left out.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer
from typer import _click as click
from typer.core import TyperCommand, TyperGroup

__all__ = ["LazyCommand", "LazyGroup"]

log = logging.getLogger("carrier.cli")


@dataclass(frozen=True, slots=True)
class LazyCommand:
    target: str
    """``module:attribute``: a Typer app (a command group) or a function (one command)."""
    help: str
    """The one line ``carrier --help`` shows; a test holds it equal to the command's own."""


def load_command(name: str, target: str) -> click.Command:
    """The click command behind ``target`` (``module:attribute``), named ``name``."""
    module_name, _, attribute = target.partition(":")
    obj: Any = getattr(importlib.import_module(module_name), attribute)
    if isinstance(obj, typer.Typer):
        command = typer.main.get_command(obj)
    else:
        single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        single.command(name)(obj)
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazyGroup(TyperGroup):
    """Set ``lazy`` (name → :class:`LazyCommand`) and ``plugins`` (a callable listing extra
    ``(name, target)`` pairs, called once, when a name is not in ``lazy``) on a subclass."""

    lazy: dict[str, LazyCommand] = {}
    plugins: Callable[[], dict[str, str]] = dict

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._plugin_targets: dict[str, str] | None = None

    def _plugin_table(self) -> dict[str, str]:
        if self._plugin_targets is None:
            self._plugin_targets = {
                name: target
                for name, target in type(self).plugins().items()
                if name not in self.lazy and name not in self.commands
            }
        return self._plugin_targets

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.lazy, *self.commands, *sorted(self._plugin_table())]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """For the listing in ``--help``: a loaded command, or a stand-in carrying its help."""
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name in self.lazy:
            return TyperCommand(cmd_name, help=self.lazy[cmd_name].help)
        if cmd_name in self._plugin_table():
            # Importing an adapter costs more than the rest of `carrier --help`: listed unloaded.
            return TyperCommand(cmd_name, help=f"The {cmd_name} adapter's commands.")
        return None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else None
        if name is not None and name not in self.commands:
            if name in self.lazy:
                self.commands[name] = load_command(name, self.lazy[name].target)
            elif name in self._plugin_table():
                self._load(name)
        return super().resolve_command(ctx, args)

    def _load(self, name: str) -> None:
        """An adapter's command group; one that fails to load is reported, not fatal."""
        target = self._plugin_table()[name]
        try:
            self.commands[name] = load_command(name, target)
        except Exception as exc:
            log.warning("command group %r not loaded: %s", name, exc)
            self._plugin_table().pop(name, None)
