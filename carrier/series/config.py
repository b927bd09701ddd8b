"""The series' settings, read at the edge from the environment (``CARRIER_SERIES_*``).

- ``CARRIER_SERIES``: ``on`` (default) or ``off`` (nothing recorded: no charts, no budgets).
- ``CARRIER_SERIES_FLUSH_SECONDS`` (5): how often the buffered counters are written, in one write.
- ``CARRIER_SERIES_MINUTE_DAYS`` (7): how long per-minute counters are kept.
- ``CARRIER_SERIES_DAYS`` (400): how long per-day counters are kept (a monthly budget needs a
  month; a year's comparison a little more).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from carrier.errors import ConfigError

__all__ = ["SeriesConfig"]


def _number(environ: Mapping[str, str], name: str, default: float, *, low: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not a number; set it to {default:g} or unset it"
        ) from None
    if value < low:
        raise ConfigError(f"{name}={raw!r} is below {low:g}; set it to {default:g} or unset it")
    return value


@dataclass(frozen=True)
class SeriesConfig:
    enabled: bool = True
    flush_s: float = 5.0
    minute_days: int = 7
    day_days: int = 400

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> SeriesConfig:
        """The settings in ``environ``; :class:`ConfigError` naming the variable otherwise."""
        switch = environ.get("CARRIER_SERIES", "on").strip().lower() or "on"
        if switch not in ("on", "off", "1", "0", "true", "false"):
            raise ConfigError(f"CARRIER_SERIES={switch!r}: use on or off")
        return cls(
            enabled=switch in ("on", "1", "true"),
            flush_s=_number(environ, "CARRIER_SERIES_FLUSH_SECONDS", cls.flush_s, low=0.05),
            minute_days=int(_number(environ, "CARRIER_SERIES_MINUTE_DAYS", cls.minute_days, low=1)),
            day_days=int(_number(environ, "CARRIER_SERIES_DAYS", cls.day_days, low=32)),
        )
