"""The ``carrier`` command. Heavy imports (torch, litellm) happen inside commands, never at import,
so ``carrier --help`` stays fast."""

from __future__ import annotations

import asyncio
import getpass
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from carrier.character import Character
    from carrier.settings import Settings

app = typer.Typer(
    name="carrier",
    help="Run persona bots (ElizaOS-compatible characters) with memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

CHARACTER_SUFFIXES = (".json", ".yaml", ".yml", ".png")


def _err(message: str) -> None:
    typer.echo(message, err=True)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in (
        "httpx",
        "LiteLLM",
        "litellm",
        "sentence_transformers",
        "transformers",
        "aiosqlite",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _quiet_ml() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _load_or_exit(path: Path) -> Character:
    from carrier.character import load_character
    from carrier.errors import CharacterError

    try:
        return load_character(path)
    except CharacterError as exc:
        _err(str(exc))
        raise typer.Exit(2) from None


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Character files or folders of them.")],
) -> None:
    """Check character files and report every problem in every file (exit 1 if any)."""
    from carrier.character import validate_paths

    results = validate_paths(paths)
    if not results:
        _err("no character files found in: " + ", ".join(str(p) for p in paths))
        raise typer.Exit(1)
    bad = 0
    for file, problems in results.items():
        if problems:
            bad += 1
            typer.echo(f"FAIL {file}: {len(problems)} problem(s)")
            for problem in problems:
                typer.echo(f"  - {problem}")
        else:
            typer.echo(f"ok   {file}")
    typer.echo(f"{len(results) - bad} ok, {bad} with problems")
    if bad:
        raise typer.Exit(1)


@app.command("import-card")
def import_card_cmd(
    card: Annotated[Path, typer.Argument(help="A Character Card V2/V3 (.json or .png).")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Where to write (.yaml or .json).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
) -> None:
    """Convert a Character Card into a Carrier persona file."""
    from carrier.character import dump_character, import_card
    from carrier.errors import CharacterError

    try:
        character = import_card(card)
    except CharacterError as exc:
        _err(str(exc))
        raise typer.Exit(2) from None
    if output is None:
        slug = (
            "".join(ch if ch.isalnum() else "-" for ch in character.name.lower()).strip("-")
            or "character"
        )
        output = Path("characters") / f"{slug}.yaml"
    if output.exists() and not force:
        _err(f"{output} exists; pass --force to overwrite it or -o to choose another file")
        raise typer.Exit(1)
    output.parent.mkdir(parents=True, exist_ok=True)
    dump_character(character, output)
    typer.echo(f"wrote {output} ({character.name})")


@app.command()
def chat(
    character_path: Annotated[Path, typer.Argument(metavar="CHARACTER", help="A character file.")],
    user: Annotated[str | None, typer.Option(help="Your name in the conversation.")] = None,
    stream: Annotated[bool, typer.Option(help="Show the reply while it is written.")] = True,
    show_thought: Annotated[
        bool, typer.Option(help="Also print the agent's private reasoning.")
    ] = False,
) -> None:
    """Talk to a persona in the terminal (reads piped stdin too). Memory persists across runs."""
    _quiet_ml()
    from carrier.settings import load_settings

    settings = load_settings()
    _setup_logging(settings.log_level if settings.log_level.upper() != "INFO" else "WARNING")
    character = _load_or_exit(character_path)
    name = user or os.environ.get("CARRIER_USER") or _login_name()
    try:
        asyncio.run(_chat(character, settings, name, stream=stream, show_thought=show_thought))
    except KeyboardInterrupt:
        _err("")


def _login_name() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "user"


async def _chat(
    character: Character, settings: Settings, user: str, *, stream: bool, show_thought: bool
) -> None:
    from carrier.assemble import build_runtime, default_embedder, open_store
    from carrier.types import Author, Channel, Message, RoomKind

    interactive = sys.stdin.isatty()
    store = await open_store(settings)
    try:
        embedder = default_embedder()
        runtime, choice = build_runtime(
            character, settings=settings, store=store, embedder=embedder, environ=os.environ
        )
        _err(f"carrier: {character.name}: {choice.description}")
        await runtime.start()
        author = Author(platform_id=user, name=user)
        channel = Channel(platform_id=f"terminal:{user}", name="terminal", kind=RoomKind.CLI)
        loop = asyncio.get_running_loop()
        while True:
            if interactive:
                line = await loop.run_in_executor(None, _prompt, "you> ")
            else:
                line = await loop.run_in_executor(None, sys.stdin.readline)
            if line is None or line == "":
                break
            text = line.strip()
            if not text:
                continue
            if interactive and text in ("/quit", "/exit"):
                break
            message = Message(platform="cli", author=author, channel=channel, text=text)
            typer.echo(f"{character.name}: ", nl=False)
            streamed: list[str] = []

            async def show(piece: str, _streamed: list[str] = streamed) -> None:
                _streamed.append(piece)
                sys.stdout.write(piece)
                sys.stdout.flush()

            result = await runtime.handle(message, on_chunk=show if stream else None)
            shown = "".join(streamed)
            if not result.replies:
                typer.echo(f"({result.reason or 'no reply'})" if not shown else "")
            else:
                first = result.replies[0].content.text
                rest = [m.content.text for m in result.replies[1:]]
                if shown.strip() != first.strip():
                    # A hook changed the text, or the model did not stream: print the stored reply.
                    if shown:
                        typer.echo("")
                        typer.echo(f"{character.name}: ", nl=False)
                    typer.echo(first)
                else:
                    typer.echo("")
                for text_part in rest:
                    typer.echo(f"{character.name}: {text_part}")
            if show_thought and result.thought:
                typer.echo(f"  (thought: {result.thought})")
        await runtime.stop()
    finally:
        await store.close()


def _prompt(label: str) -> str | None:
    try:
        return input(label) + "\n"
    except EOFError:
        return None


@app.command()
def run(
    characters: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[CHARACTER]...", help="Persona files (default: every file in characters/)."
        ),
    ] = None,
    no_api: Annotated[
        bool, typer.Option("--no-api", help="Do not serve the API and console.")
    ] = False,
    host: Annotated[str, typer.Option(help="Where the API listens.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The API's port.")] = 8000,
) -> None:
    """Run personas: their clients, the job scheduler, the API and console.

    Each persona's clients start where their credentials exist. Stops on Ctrl-C or SIGTERM.
    """
    _quiet_ml()
    from carrier.errors import ConfigError
    from carrier.settings import load_settings

    settings = load_settings()
    _setup_logging(settings.log_level)
    paths = list(characters or [])
    if not paths:
        folder = settings.characters_dir
        paths = (
            sorted(p for p in folder.glob("*") if p.suffix.lower() in CHARACTER_SUFFIXES)
            if folder.is_dir()
            else []
        )
        if not paths:
            _err(f"no character files in {folder}/; name one: carrier run characters/NAME.yaml")
            raise typer.Exit(1)
    from carrier.run import run_main

    try:
        code = asyncio.run(
            run_main(paths, settings=settings, serve_api=not no_api, host=host, port=port)
        )
    except ConfigError as exc:
        _err(f"carrier: {exc}")
        raise typer.Exit(2) from None
    raise typer.Exit(code)


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Where to listen (non-loopback needs CARRIER_ADMIN_TOKEN).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    clients: Annotated[
        bool,
        typer.Option(
            "--clients/--no-clients",
            help="Start agents' platform clients (Discord, Instagram) here; --no-clients when a "
            "worker process (carrier run --no-api) runs them, so no bot connects twice.",
        ),
    ] = True,
) -> None:
    """Serve the agent API and console for the agents stored in the store."""
    _quiet_ml()
    from carrier.errors import ConfigError
    from carrier.run import serve_main
    from carrier.settings import load_settings

    settings = load_settings()
    _setup_logging(settings.log_level)
    try:
        code = asyncio.run(serve_main(settings, host=host, port=port, start_clients=clients))
    except ConfigError as exc:
        _err(f"carrier: {exc}")
        raise typer.Exit(2) from None
    raise typer.Exit(code)


def main() -> None:
    # Secrets and settings may live in .env: make them visible to everything (provider SDKs,
    # character secret references) without overriding the real environment.
    from dotenv import load_dotenv

    load_dotenv(".env", override=False)
    _mount_plugin_commands()
    app()


def _mount_core_commands() -> None:
    from carrier.jobs.cli import jobs_app
    from carrier.knowledge_cli import knowledge_app
    from carrier.memory_cli import memory_app

    app.add_typer(jobs_app, name="jobs")
    app.add_typer(memory_app, name="memory")
    app.add_typer(knowledge_app, name="knowledge")


_mount_core_commands()


def _mount_plugin_commands() -> None:
    """Command groups that adapters register under the ``carrier.cli`` entry-point group."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="carrier.cli"):
        try:
            app.add_typer(ep.load(), name=ep.name)
        except Exception as exc:  # a broken adapter must not break the command
            logging.getLogger("carrier.cli").warning(
                "command group %r not loaded: %s", ep.name, exc
            )


if __name__ == "__main__":
    main()
