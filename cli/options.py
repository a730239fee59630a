"""Turning command-line words into a validated RunConfig, before anything is started or
written. Every failure is an InvalidInput with one line a user can act on."""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pydantic import ValidationError, create_model

from events.config import (ANALYSTS, DEFAULT_VENDORS, RESUMABLE_SETTINGS, VENDOR_CATEGORIES,
                           RunConfig)
from events.errors import InvalidInput
from events.inputs import validate_ticker, validate_trade_date
from events.settings import setting

#: Which vendors can serve each data category (what --vendors accepts).
CATEGORY_VENDORS: dict[str, tuple[str, ...]] = {
    c: tuple(v for v, cats in VENDOR_CATEGORIES.items() if c in cats) for c in DEFAULT_VENDORS}
#: Vendors that --vendor may name for every category at once.
VENDORS = CATEGORY_VENDORS["prices"]
#: Environment variables that set defaults (flags win); their table is events/settings.py.
ENV = {"store": "TA_ACTORS_STORE", "quick_model": "TA_ACTORS_QUICK_MODEL",
       "deep_model": "TA_ACTORS_DEEP_MODEL", "base_url": "TA_ACTORS_BASE_URL",
       "vendor": "TA_ACTORS_VENDOR", "vendors": "TA_ACTORS_VENDORS",
       "data_dir": "TA_ACTORS_DATA_DIR", "language": "TA_ACTORS_OUTPUT_LANGUAGE",
       "max_tickers": "TA_ACTORS_MAX_TICKERS", "max_stale_days": "TA_ACTORS_MAX_STALE_DAYS"}
#: Bounds of a --tickers-file: it is read no further than this.
TICKERS_FILE_MAX_BYTES = 1_000_000
TICKERS_FILE_MAX_LINES = 20_000
#: Command-line flag of each RunConfig field, for error lines.
FLAGS = {"debate_rounds": "--debate-rounds", "risk_rounds": "--risk-rounds",
         "max_tool_calls": "--max-tool-calls", "token_budget": "--token-budget",
         "cost_budget_usd": "--cost-budget", "output_language": "--language",
         "holding_days": "--holding-days", "benchmark": "--benchmark",
         "offline_latency_s": "--latency", "trade_date": "--date",
         "max_stale_days": "--max-stale-days"}


def config_error(exc: ValidationError) -> InvalidInput:
    """The first problem pydantic found, as one line naming the setting and its flag."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    flag = FLAGS.get(where)
    message = str(first["msg"]).removeprefix("Value error, ")
    return InvalidInput(f"invalid setting {where}{f' ({flag})' if flag else ''}: {message}")


def max_tickers(cap: int | None = None) -> int:
    """The cap on tickers per command: --max-tickers, else TA_ACTORS_MAX_TICKERS, else 500."""
    value = cap if cap is not None else setting(ENV["max_tickers"])
    if value < 1:
        raise InvalidInput(f"--max-tickers must be at least 1, not {value}")
    return value


def check_ticker_count(count: int, cap: int | None = None) -> None:
    limit = max_tickers(cap)
    if count > limit:
        raise InvalidInput(f"{count} tickers is more than {limit} per command; split the list "
                           f"or raise the cap (--max-tickers / {ENV['max_tickers']})")


def parse_analysts(raw: str) -> tuple[str, ...]:
    names = tuple(a.strip().lower() for a in raw.split(",") if a.strip())
    unknown = [a for a in names if a not in ANALYSTS]
    if unknown or not names:
        raise InvalidInput(f"unknown analyst {', '.join(unknown) or '(none given)'}; "
                           f"choose from {', '.join(ANALYSTS)}")
    return names


def vendor_chains(vendor: str | None, data_dir: str | None, offline: bool
                  ) -> dict[str, tuple[str, ...]]:
    """One vendor for every category it can serve; the others (social, macro and
    predictions for yfinance or alpha_vantage) keep their default chains."""
    if vendor is None:
        vendor = "local" if data_dir else ("synthetic" if offline else None)
    if vendor is None:
        return dict(DEFAULT_VENDORS)
    if vendor not in VENDORS:
        raise InvalidInput(f"unknown vendor {vendor!r}; choose from {', '.join(VENDORS)}")
    if vendor == "local" and not data_dir:
        raise InvalidInput("--vendor local needs --data-dir DIR (a folder of SYMBOL.csv files)")
    return {category: (vendor,) if category in VENDOR_CATEGORIES[vendor] else chain
            for category, chain in DEFAULT_VENDORS.items()}


def parse_vendor_chains(raw: str, data_dir: str | None) -> dict[str, tuple[str, ...]]:
    """``prices=yfinance,local;news=local`` -> {"prices": ("yfinance", "local"), ...}: an
    ordered fallback chain per data category (the first vendor with data answers)."""
    chains: dict[str, tuple[str, ...]] = {}
    for part in (p.strip() for p in raw.split(";")):
        if not part:
            continue
        category, sep, names = (x.strip() for x in part.partition("="))
        category = category.lower()
        if not sep or not category:
            raise InvalidInput(f"--vendors: {part!r} is not CATEGORY=VENDOR[,VENDOR...] "
                               "(e.g. prices=yfinance,local;news=local)")
        if category not in CATEGORY_VENDORS:
            raise InvalidInput(f"--vendors: unknown data category {category!r}; choose from "
                               + ", ".join(CATEGORY_VENDORS))
        if category in chains:
            raise InvalidInput(f"--vendors: category {category!r} is given twice")
        chain = tuple(v.strip().lower() for v in names.split(",") if v.strip())
        if not chain:
            raise InvalidInput(f"--vendors: no vendor given for {category!r}")
        known = sorted({v for names_ in CATEGORY_VENDORS.values() for v in names_})
        for name in chain:
            if name not in known:
                raise InvalidInput(f"--vendors: unknown vendor {name!r}; choose from "
                                   + ", ".join(known))
            if name not in CATEGORY_VENDORS[category]:
                raise InvalidInput(f"--vendors: vendor {name!r} cannot serve {category}; "
                                   f"choose from {', '.join(CATEGORY_VENDORS[category])}")
        if len(set(chain)) != len(chain):
            raise InvalidInput(f"--vendors: a vendor is repeated in {category}={names}")
        if "local" in chain and not data_dir:
            raise InvalidInput(f"--vendors {category}=...local needs --data-dir DIR "
                               "(a folder of SYMBOL.csv files)")
        chains[category] = chain
    if not chains:
        raise InvalidInput("--vendors is empty; e.g. prices=yfinance,local;news=local")
    return chains


#: The local-model options (issue 11): RunConfig field -> (variable, flag).
LLM_OPTIONS: dict[str, tuple[str, str]] = {
    "llm_concurrency": ("TA_ACTORS_LLM_CONCURRENCY", "--llm-concurrency"),
    "llm_idle_timeout_s": ("TA_ACTORS_LLM_IDLE_TIMEOUT", "--llm-idle-timeout"),
    "llm_timeout_s": ("TA_ACTORS_LLM_TIMEOUT", "--llm-timeout"),
    "context_window": ("TA_ACTORS_CONTEXT_WINDOW", "--context-window")}
ENV.update({name: variable for name, (variable, _) in LLM_OPTIONS.items()})
FLAGS.update({name: flag for name, (_, flag) in LLM_OPTIONS.items()})


def _repeated(symbols: list[str], shown: int = 5) -> list[str]:
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for s in symbols:
        if s in seen:
            repeated[s] = None
        seen.add(s)
    return list(repeated)[:shown + 1]


def build_configs(tickers: list[str], date: str, analysts: str, debate_rounds: int,
                  risk_rounds: int, offline: bool, quick_model: str | None,
                  deep_model: str | None, base_url: str | None, vendor: str | None,
                  data_dir: str | None, vendors: str | None = None,
                  max_tickers: int | None = None, **extra: object) -> list[RunConfig]:
    """One RunConfig per ticker, every input checked first (range checks are RunConfig's):
    InvalidInput with one line at the first problem."""
    if not tickers:
        raise InvalidInput("give at least one ticker")
    check_ticker_count(len(tickers), max_tickers)
    env_dir = setting(ENV["data_dir"])
    data_dir = data_dir or (str(env_dir) if env_dir else None)
    symbols = [validate_ticker(t) for t in tickers]
    repeated = _repeated(symbols)
    if repeated:
        more = " …" if len(repeated) > 5 else ""
        raise InvalidInput(f"a ticker is repeated: {' '.join(repeated[:5])}{more}")
    trade_date = validate_trade_date(date)
    if data_dir and not Path(data_dir).expanduser().is_dir():
        raise InvalidInput(f"--data-dir {data_dir} is not a folder")
    quick = "offline/quick" if offline else (quick_model or setting(ENV["quick_model"]))
    deep = "offline/deep" if offline else (deep_model or setting(ENV["deep_model"]))
    chains = vendor_chains(vendor or setting(ENV["vendor"]), data_dir, offline)
    per_category = vendors or setting(ENV["vendors"])
    if per_category:  # per-category chains win over the one --vendor
        chains.update(parse_vendor_chains(per_category, data_dir))
    extra = {k: v for k, v in extra.items() if v is not None}
    extra.setdefault("output_language", setting(ENV["language"]))
    extra.setdefault("max_stale_days", setting(ENV["max_stale_days"]))
    fields: dict[str, Any] = dict(
        analysts=parse_analysts(analysts), debate_rounds=debate_rounds,
        risk_rounds=risk_rounds, quick_model=quick, deep_model=deep,
        base_url=base_url or setting(ENV["base_url"]), vendors=chains,
        data_dir=str(Path(data_dir).expanduser().resolve()) if data_dir else None, **extra)
    for name, (variable, _flag) in LLM_OPTIONS.items():  # local models: flag, else variable
        if fields.get(name) is None and setting(variable) is not None:
            fields[name] = setting(variable)
    try:
        return [RunConfig(ticker=s, trade_date=trade_date, **fields) for s in symbols]
    except ValidationError as exc:
        raise config_error(exc) from None


#: The budget fields of RunConfig alone, with RunConfig's own constraints.
_Budgets: Any = create_model("Budgets", **{  # type: ignore[call-overload]
    name: (RunConfig.model_fields[name].annotation, RunConfig.model_fields[name])
    for name in ("token_budget", "cost_budget_usd")})


def check_budgets(token_budget: int | None, cost_budget: float | None) -> None:
    """The budgets a resume may set, checked exactly as RunConfig checks them."""
    for name, value in (("token_budget", token_budget), ("cost_budget_usd", cost_budget)):
        try:
            _Budgets(**{name: value})
        except ValidationError as exc:
            message = str(exc.errors()[0]["msg"])
            raise InvalidInput(f"{FLAGS[name]} {value}: {message}") from None


#: The local-model fields of RunConfig alone, with RunConfig's own constraints.
_LLMSettings: Any = create_model("LLMSettings", **{  # type: ignore[call-overload]
    name: (RunConfig.model_fields[name].annotation, RunConfig.model_fields[name])
    for name in RESUMABLE_SETTINGS})


def check_llm_settings(**given: float | int | None) -> dict[str, float | int]:
    """The local-model settings a resume changes (those given), checked exactly as RunConfig
    checks them."""
    settings = {name: value for name, value in given.items() if value is not None}
    assert set(given) <= set(RESUMABLE_SETTINGS), given  # a programming error, not input
    for name, value in settings.items():
        try:
            _LLMSettings(**{name: value})
        except ValidationError as exc:
            message = str(exc.errors()[0]["msg"])
            raise InvalidInput(f"{FLAGS[name]} {value}: {message}") from None
    return settings


def new_run_id(config: RunConfig) -> str:
    import uuid
    return f"{config.ticker}-{config.trade_date}-{uuid.uuid4().hex[:8]}"


def trade_dates(start: str, end: str, every: int) -> list[dt.date]:
    """Every ``every``-th weekday from ``start`` to ``end`` (both validated, inclusive)."""
    first, last = validate_trade_date(start), validate_trade_date(end)
    if last < first:
        raise InvalidInput(f"--to {last} is before --date {first}")
    if not 1 <= every <= 250:
        raise InvalidInput(f"--every must be between 1 and 250 trading days, not {every}")
    days, day = [], first
    while day <= last:
        if day.weekday() < 5:
            days.append(day)
        day += dt.timedelta(days=1)
    chosen = days[::every]
    if len(chosen) > 500:
        raise InvalidInput(f"{len(chosen)} trade dates is too many for one backtest (max 500)")
    return chosen


def read_tickers_file(path: Path, max_bytes: int = TICKERS_FILE_MAX_BYTES,
                      max_lines: int = TICKERS_FILE_MAX_LINES) -> list[str]:
    """Tickers from a file: one per line (or several separated by spaces or commas); text after
    # is a comment. Validated later with the rest of the command.

    Read no further than ``max_bytes`` (so /dev/zero or a huge file cannot exhaust memory)
    and refused beyond ``max_lines`` lines or when it is not UTF-8 text."""
    try:
        with Path(path).expanduser().open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read tickers file {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise InvalidInput(f"tickers file {path} is larger than {max_bytes:,} bytes")
    try:
        if b"\0" in data:
            raise UnicodeError
        text = data.decode("utf-8")
    except UnicodeError:
        raise InvalidInput(f"tickers file {path} is not UTF-8 text") from None
    lines = text.splitlines()
    if len(lines) > max_lines:
        raise InvalidInput(f"tickers file {path} has more than {max_lines:,} lines")
    tickers = [t for line in lines
               for t in line.split("#", 1)[0].replace(",", " ").split()]
    if not tickers:
        raise InvalidInput(f"tickers file {path} lists no tickers")
    return tickers
