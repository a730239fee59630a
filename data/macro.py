"""Macro indicators the news analyst may ask for: FRED series ids with what each measures.

Data, not code: a series is one row. The tool offers exactly these ids (so a model cannot
ask FRED for an arbitrary series), and the synthetic vendor draws its stand-ins from the
same rows."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Series:
    title: str
    units: str
    frequency: str  # "daily" | "weekly" | "monthly" | "quarterly"
    level: float  # a typical level, for the synthetic stand-in only


MACRO_SERIES: dict[str, Series] = {
    "DFF": Series("Federal funds effective rate", "percent", "daily", 3.0),
    "FEDFUNDS": Series("Federal funds effective rate, monthly average", "percent", "monthly",
                       3.0),
    "CPIAUCSL": Series("Consumer price index, all urban consumers (seasonally adjusted)",
                       "index 1982-1984=100", "monthly", 280.0),
    "CPILFESL": Series("Core CPI, less food and energy (seasonally adjusted)",
                       "index 1982-1984=100", "monthly", 290.0),
    "UNRATE": Series("Unemployment rate", "percent", "monthly", 4.5),
    "PAYEMS": Series("Nonfarm payrolls", "thousands of persons", "monthly", 150000.0),
    "DGS10": Series("10-year Treasury constant-maturity yield", "percent", "daily", 3.5),
    "DGS2": Series("2-year Treasury constant-maturity yield", "percent", "daily", 3.0),
    "T10Y2Y": Series("10-year minus 2-year Treasury yield spread", "percentage points", "daily",
                     0.5),
    "GDPC1": Series("Real gross domestic product", "billions of chained 2017 dollars, annual "
                    "rate", "quarterly", 21000.0),
    "VIXCLS": Series("CBOE volatility index (VIX)", "index", "daily", 18.0),
}
#: Asked for when the model names no series: rates, prices, jobs, the long yield.
DEFAULT_MACRO = ("DFF", "CPIAUCSL", "UNRATE", "DGS10")
#: Calendar days of history fetched per series: enough for the latest value of a quarterly
#: series and the value a year before it.
MACRO_HISTORY_DAYS = 500
