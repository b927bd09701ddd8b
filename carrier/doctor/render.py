"""A :class:`Report` for people (one line per check, each failure with its fix) or machines."""

from __future__ import annotations

import json
from dataclasses import asdict

from carrier.doctor.base import Result, Status
from carrier.doctor.runner import Report

__all__ = ["render_json", "render_text", "summary"]

_MARKS: dict[Status, tuple[str, str, str | None]] = {
    # status: (terminal mark, plain word, colour)
    "ok": ("✓", "ok  ", "green"),
    "warn": ("!", "warn", "yellow"),
    "fail": ("✗", "FAIL", "red"),
    "skip": ("-", "skip", None),
}


def _line(result: Result, indent: str, terminal: bool) -> list[str]:
    mark, word, colour = _MARKS[result.status]
    if terminal:
        import typer

        head = typer.style(mark, fg=colour, bold=True) if colour else mark
    else:
        head = word
    text = f"{indent}{head} {result.name}" + (f": {result.detail}" if result.detail else "")
    lines = [text]
    if result.fix and result.status in ("warn", "fail"):
        lines.append(f"{indent}     fix: {result.fix}")
    return lines


def summary(report: Report) -> str:
    counts = report.counts
    parts = [
        f"{counts['fail']} failed",
        f"{counts['warn']} warning{'s' if counts['warn'] != 1 else ''}",
        f"{counts['ok']} ok",
        f"{counts['skip']} skipped",
    ]
    if report.failed:
        verdict = "fix the failures above, then run carrier doctor again"
    elif counts["warn"]:
        verdict = "ready to run; the warnings are worth a look"
    else:
        verdict = "ready to run"
    return f"summary: {', '.join(parts)}: {verdict}"


def render_text(report: Report, *, terminal: bool = False) -> str:
    """Deployment checks first, then one block per persona; ``terminal`` uses marks and colour."""
    lines: list[str] = []
    current: str | None = None
    for result in report.results:
        if result.persona != current:
            current = result.persona
            if current is not None:
                lines += ["", current]
        lines += _line(result, "  " if current is not None else "", terminal)
    lines += ["", summary(report)]
    return "\n".join(lines)


def render_json(report: Report) -> str:
    return json.dumps(
        {
            "ok": not report.failed,
            "exit_code": report.exit_code,
            "counts": report.counts,
            "checks": [asdict(r) for r in report.results],
        },
        indent=2,
        ensure_ascii=False,
    )
