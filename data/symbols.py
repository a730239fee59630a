"""Broker and TradingView spellings -> Yahoo symbols, and the alpha benchmark per ticker.

The mapping lives in symbols.json (data, not code) so a new alias or exchange is one line.
Normalisation is pure string work; the result always passes ``validate_ticker`` before it can
reach a path, a file name or a query."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from events.inputs import validate_ticker

_TABLE_PATH = Path(__file__).with_name("symbols.json")


@lru_cache(maxsize=1)
def table() -> dict:
    return json.loads(_TABLE_PATH.read_text())


def safe(sym: str) -> str:
    """``validate_ticker`` (which admits one leading caret, for index symbols such as ^GSPC)."""
    return validate_ticker((sym or "").strip().upper())


def to_yahoo(raw: str) -> str:
    """The Yahoo spelling of ``raw`` (e.g. BRK.B -> BRK-B, XAUUSD -> GC=F, TSE:7203 -> 7203.T,
    BTC-USDT -> BTC-USD; a broker's trailing "+" as in XAUUSD+ is dropped).

    Raises InvalidInput when the result is not a safe ticker, or ``raw`` is not text."""
    if raw is not None and not isinstance(raw, str):
        return validate_ticker(raw)  # raises: the validator's own message
    t = table()
    s = re.sub(r"\s+", "", raw or "").upper()
    if len(s) > 1:
        s = s.rstrip("+")  # MT4/MT5 brokers mark a contract variant with "+" (XAUUSD+)
    if ":" in s:
        prefix, s = s.split(":", 1)
        suffix = t["exchange_prefix"].get(prefix, "")
        if suffix == ".HK" and s.isdigit():
            s = s.lstrip("0").rjust(4, "0")  # Yahoo writes Hong Kong codes with 4 digits
        if suffix and "." not in s:
            s += suffix
    if s in t["aliases"]:
        return safe(t["aliases"][s])
    pair = s.replace("/", "")
    for base in t["crypto_bases"]:
        quote = pair[len(base):].removeprefix("-")  # BTC-USDT as well as BTCUSDT
        if pair.startswith(base) and quote in t["crypto_quotes"]:
            return validate_ticker(f"{base}-{t['crypto_quotes'][quote]}")
    if len(pair) == 6 and pair[:3] in t["currencies"] and pair[3:] in t["currencies"]:
        return validate_ticker(f"{pair}=X")
    if "." in s:
        head, tail = s.rsplit(".", 1)
        if tail not in t["yahoo_suffixes"] and len(tail) <= 2 and tail.isalpha():
            s = f"{head}-{tail}"  # share class: BRK.B -> BRK-B
    return safe(s)


def benchmark_for(ticker: str, configured: str | None = None) -> str:
    """Configured benchmark if any, else the home index for the exchange suffix, else SPY."""
    if configured:
        return safe(configured)
    t = table()
    sym = to_yahoo(ticker)
    if "." in sym:
        suffix = sym.rsplit(".", 1)[1]
        if suffix in t["benchmarks"]:
            return t["benchmarks"][suffix]
    return t["default_benchmark"]
