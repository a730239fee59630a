"""Every environment variable ta-actors reads: one table (variable, type, default, meaning)
and one reader, ``setting(name)``.

Flags win over variables; a variable wins over the default. A variable that is set but blank
counts as unset. The README's configuration table is checked against this table by a test
(tests/test_settings.py), so the two cannot drift apart.

Provider API keys (OPENAI_API_KEY, ...) are not here: they are the variables litellm itself
reads, listed per provider in ``providers.keys.KEY_ENV``."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from events.errors import InvalidInput

__all__ = ["Setting", "SETTINGS", "SettingError", "setting", "spec", "is_set"]


class SettingError(InvalidInput):
    """An environment variable holds a value of the wrong type (one line, names it)."""


def _user_data(*parts: str) -> Callable[[], Path]:
    def make() -> Path:
        from platformdirs import user_data_dir
        return Path(user_data_dir("ta-actors"), *parts)
    return make


def _user_config(*parts: str) -> Callable[[], Path]:
    def make() -> Path:
        from platformdirs import user_config_dir
        return Path(user_config_dir("ta-actors"), *parts)
    return make


def _user_cache(*parts: str) -> Callable[[], Path]:
    def make() -> Path:
        from platformdirs import user_cache_dir
        return Path(user_cache_dir("ta-actors"), *parts)
    return make


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, the type its value is parsed to, its default and
    what it means; ``flag`` is the command-line option that wins over it, if any."""
    name: str
    type: type
    meaning: str
    default: Any = None
    flag: str | None = None
    #: Computed default (a path in the user's folders), when it depends on the machine.
    default_factory: Callable[[], Any] | None = None
    #: The default as the README shows it; derived from ``default`` when not given.
    shown: str | None = None
    #: A secret: its value is never printed.
    secret: bool = False

    @property
    def type_name(self) -> str:
        return {Path: "path", int: "integer", str: "text"}.get(self.type, self.type.__name__)

    @property
    def shown_default(self) -> str:
        if self.shown is not None:
            return self.shown
        return "-" if self.default is None else str(self.default)

    def default_value(self) -> Any:
        return self.default_factory() if self.default_factory else self.default

    def parse(self, raw: str) -> Any:
        value = raw.strip()
        if self.type is int:
            try:
                return int(value)
            except ValueError:
                raise SettingError(f"{self.name}={value!r} is not a whole number") from None
        if self.type is Path:
            return Path(value).expanduser()
        return value


SETTINGS: tuple[Setting, ...] = (
    Setting("TA_ACTORS_STORE", Path, "event store file (DuckDB)", flag="--store",
            default_factory=_user_data("events.duckdb"),
            shown="user data dir/events.duckdb"),
    Setting("TA_ACTORS_QUICK_MODEL", str,
            "quick model (analysts, debaters, trader, reflector)", "offline/quick",
            flag="--quick-model"),
    Setting("TA_ACTORS_DEEP_MODEL", str, "deep model (research manager, portfolio manager)",
            "offline/deep", flag="--deep-model"),
    Setting("TA_ACTORS_BASE_URL", str, "OpenAI-compatible / local endpoint",
            flag="--base-url"),
    Setting("TA_ACTORS_LLM_CONCURRENCY", int, "model calls in flight per endpoint",
            flag="--llm-concurrency",
            shown="server's slots (llama.cpp), else 1 local, per-provider hosted"),
    Setting("TA_ACTORS_LLM_IDLE_TIMEOUT", int,
            "seconds without a streamed token before a model call try fails", 120,
            flag="--llm-idle-timeout"),
    Setting("TA_ACTORS_LLM_TIMEOUT", int, "overall cap in seconds on one model call try",
            flag="--llm-timeout", shown="1800 local, 600 hosted"),
    Setting("TA_ACTORS_CONTEXT_WINDOW", int, "context window of the models, in tokens",
            flag="--context-window", shown="server's, else capability table"),
    Setting("TA_ACTORS_VENDOR", str, "data vendor for every category", flag="--vendor",
            shown="yfinance (reddit, stocktwits for social)"),
    Setting("TA_ACTORS_DATA_DIR", Path, "folder of `SYMBOL.csv` prices", flag="--data-dir"),
    Setting("TA_ACTORS_VENDORS", str, "vendor chains per category", flag="--vendors"),
    Setting("TA_ACTORS_OUTPUT_LANGUAGE", str, "report language (ratings stay English)",
            "English", flag="--language"),
    Setting("TA_ACTORS_MAX_TICKERS", int, "most tickers one command may research", 500,
            flag="--max-tickers"),
    Setting("TA_ACTORS_MAX_STALE_DAYS", int,
            "most trading days a verified snapshot's last bar may lie before the trade date",
            5, flag="--max-stale-days"),
    Setting("TA_ACTORS_CACHE", Path, "market-data cache file (DuckDB)",
            default_factory=_user_cache("market-cache.duckdb"),
            shown="user cache dir/market-cache.duckdb"),
    Setting("TA_ACTORS_YAHOO_ARCHIVE", Path, "replay recorded Yahoo responses from a folder"),
    Setting("TA_ACTORS_LOG_LEVEL", str, "actor log level", "INFO"),
    Setting("TA_ACTORS_CHAIN_KEY", str,
            "key of the store's keyed hash chain (HMAC-SHA-256); wins over the key file",
            secret=True),
    Setting("TA_ACTORS_CHAIN_KEY_FILE", Path,
            "file holding the chain key (created on first use, mode 0600)",
            default_factory=_user_config("chain.key"), shown="user config dir/chain.key"),
    Setting("ALPHA_VANTAGE_API_KEY", str, "Alpha Vantage key (vendor `alpha_vantage`)",
            secret=True),
    Setting("FRED_API_KEY", str, "FRED key (vendor `fred`: the news analyst's macro indicators)",
            secret=True),
)
_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def spec(name: str) -> Setting:
    """The table row of ``name``; KeyError for a variable that is not in the table."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name} is not in the settings table (events/settings.py)") from None


def is_set(name: str) -> bool:
    """Whether the variable ``name`` (a table row) is set to something not blank."""
    return bool(os.environ.get(spec(name).name, "").strip())


def setting(name: str) -> Any:
    """The value of the variable ``name`` parsed to its type, else its default (None when it
    has none). A value of the wrong type raises SettingError, one line naming the variable."""
    row = spec(name)
    raw = os.environ.get(row.name, "")
    return row.parse(raw) if raw.strip() else row.default_value()
