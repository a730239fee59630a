"""The one price-frame shape every vendor hands the router: a sorted, de-duplicated naive
DatetimeIndex named ``date`` and float columns open/high/low/close/volume. Agreeing on it once
means indicators, snapshot and cache never care which vendor answered."""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("open", "high", "low", "close", "volume")


def normalize_bars(df: "pd.DataFrame") -> "pd.DataFrame":
    import pandas as pd
    if df is None or len(df) == 0:
        return pd.DataFrame(columns=list(COLUMNS), index=pd.DatetimeIndex([], name="date"),
                            dtype=float)
    out = df.rename(columns={c: str(c).strip().lower().replace(" ", "_") for c in df.columns})
    if "date" in out.columns:
        out = out.set_index("date")
    idx = pd.to_datetime(out.index)
    if getattr(idx, "tz", None) is not None:
        idx = idx.tz_localize(None)
    out.index = pd.DatetimeIndex(idx.normalize(), name="date")
    missing = [c for c in COLUMNS if c not in out.columns]
    if missing:
        raise ValueError(f"price data lacks columns {missing}; has {list(out.columns)}")
    out = out[list(COLUMNS)].astype(float)
    out = out[~out.index.duplicated(keep="last")].sort_index()
    return out.dropna(subset=["close"])


def between(df: "pd.DataFrame", start: dt.date | None, end: dt.date | None) -> "pd.DataFrame":
    """Rows with start <= date <= end (inclusive both ends; None leaves that side open)."""
    import pandas as pd
    mask = pd.Series(True, index=df.index)
    if start is not None:
        mask &= df.index >= pd.Timestamp(start)
    if end is not None:
        mask &= df.index <= pd.Timestamp(end)
    return df[mask.to_numpy()]
