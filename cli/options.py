"""Turning command-line words into a validated RunConfig, before anything is started or
written. Every failure is an InvalidInput with one line a user can act on."""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from pydantic import ValidationError

from events.config import (ANALYSTS, DEFAULT_VENDORS, VENDOR_CATEGORIES, InvalidInput, RunConfig,
                           validate_ticker, validate_trade_date)

#: Which vendors can serve each data category (what --vendors accepts).
CATEGORY_VENDORS: dict[str, tuple[str, ...]] = {
    c: tuple(v for v, cats in VENDOR_CATEGORIES.items() if c in cats) for c in DEFAULT_VENDORS}
#: Vendors that --vendor may name for every category at once.
VENDORS = CATEGORY_VENDORS["prices"]
#: Environment variables that set defaults (flags win).
ENV = {"store": "TA_ACTORS_STORE", "quick_model": "TA_ACTORS_QUICK_MODEL",
       "deep_model": "TA_ACTORS_DEEP_MODEL", "base_url": "TA_ACTORS_BASE_URL",
       "vendor": "TA_ACTORS_VENDOR", "vendors": "TA_ACTORS_VENDORS",
       "data_dir": "TA_ACTORS_DATA_DIR",
       "language": "TA_ACTORS_OUTPUT_LANGUAGE"}


def default_store() -> Path:
    if os.environ.get(ENV["store"]):
        return Path(os.environ[ENV["store"]]).expanduser()
    from platformdirs import user_data_dir
    return Path(user_data_dir("ta-actors")) / "events.duckdb"


def parse_analysts(raw: str) -> tuple[str, ...]:
    names = tuple(a.strip().lower() for a in raw.split(",") if a.strip())
    unknown = [a for a in names if a not in ANALYSTS]
    if unknown or not names:
        raise InvalidInput(f"unknown analyst {', '.join(unknown) or '(none given)'}; "
                           f"choose from {', '.join(ANALYSTS)}")
    return names


def vendor_chains(vendor: str | None, data_dir: str | None, offline: bool
                  ) -> dict[str, tuple[str, ...]]:
    """One vendor for every category (social keeps its own chain unless offline)."""
    if vendor is None:
        vendor = "local" if data_dir else ("synthetic" if offline else None)
    if vendor is None:
        return dict(DEFAULT_VENDORS)
    if vendor not in VENDORS:
        raise InvalidInput(f"unknown vendor {vendor!r}; choose from {', '.join(VENDORS)}")
    if vendor == "local" and not data_dir:
        raise InvalidInput("--vendor local needs --data-dir DIR (a folder of SYMBOL.csv files)")
    chains = {category: (vendor,) for category in DEFAULT_VENDORS}
    if vendor in ("yfinance", "alpha_vantage"):
        chains["social"] = DEFAULT_VENDORS["social"]
    elif vendor == "local":
        chains["social"] = ("local",)
    return chains


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


def build_configs(tickers: list[str], date: str, analysts: str, debate_rounds: int,
                  risk_rounds: int, offline: bool, quick_model: str | None,
                  deep_model: str | None, base_url: str | None, vendor: str | None,
                  data_dir: str | None, vendors: str | None = None,
                  **extra: object) -> list[RunConfig]:
    if not tickers:
        raise InvalidInput("give at least one ticker")
    data_dir = data_dir or os.environ.get(ENV["data_dir"]) or None
    symbols = [validate_ticker(t) for t in tickers]
    if len(set(symbols)) != len(symbols):
        raise InvalidInput(f"a ticker is repeated: {' '.join(symbols)}")
    trade_date = validate_trade_date(date)
    for name, value in (("--debate-rounds", debate_rounds), ("--risk-rounds", risk_rounds)):
        if not 1 <= value <= 10:
            raise InvalidInput(f"{name} must be between 1 and 10, not {value}")
    if data_dir and not Path(data_dir).expanduser().is_dir():
        raise InvalidInput(f"--data-dir {data_dir} is not a folder")
    quick = "offline/quick" if offline else (quick_model or os.environ.get(ENV["quick_model"])
                                             or "offline/quick")
    deep = "offline/deep" if offline else (deep_model or os.environ.get(ENV["deep_model"])
                                           or "offline/deep")
    chains = vendor_chains(vendor or os.environ.get(ENV["vendor"]), data_dir, offline)
    per_category = vendors or os.environ.get(ENV["vendors"])
    if per_category:  # per-category chains win over the one --vendor
        chains.update(parse_vendor_chains(per_category, data_dir))
    fields = dict(analysts=parse_analysts(analysts), debate_rounds=debate_rounds,
                  risk_rounds=risk_rounds, quick_model=quick, deep_model=deep,
                  base_url=base_url or os.environ.get(ENV["base_url"]),
                  vendors=chains,
                  data_dir=str(Path(data_dir).expanduser().resolve()) if data_dir else None,
                  **{k: v for k, v in extra.items() if v is not None})
    try:
        return [RunConfig(ticker=s, trade_date=trade_date, **fields) for s in symbols]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(f"invalid setting {where}: {first['msg']}") from None


def new_run_id(config: RunConfig) -> str:
    import uuid
    return f"{config.ticker}-{config.trade_date}-{uuid.uuid4().hex[:8]}"


def today() -> dt.date:
    return dt.date.today()


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


def read_tickers_file(path: Path) -> list[str]:
    """Tickers from a file: one per line (or several separated by spaces or commas); text after
    # is a comment. Validated later with the rest of the command."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot read tickers file {path}: {exc.strerror or exc}") from None
    tickers = [t for line in text.splitlines()
               for t in line.split("#", 1)[0].replace(",", " ").split()]
    if not tickers:
        raise InvalidInput(f"tickers file {path} lists no tickers")
    return tickers
