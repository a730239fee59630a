"""Precision and recall of the grounding audit on a labelled set of analyst sentences.

    python -m bench.grounding                    # tests/data/grounding_labelled.jsonl
    python -m bench.grounding --data-dir DIR     # another folder of SYMBOL.csv prices

Each labelled sentence is a claim an analyst of (ticker, trade date) might write: *grounded*
(every figure is in, rounded from or computed from what the analyst was shown), *invented*
(a figure that is not in the data) or *look_ahead* (a date or a price from after the trade
date). What the analyst was shown is rebuilt with our real tools on real prices from
../shared/data/ohlcv: the verified snapshot and ``get_stock_data`` for the 30 days before
the trade date. The audit flags a sentence when any figure is ungrounded or look-ahead;
"positive" = invented or look_ahead. The last line printed is one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LABELLED = REPO / "tests" / "data" / "grounding_labelled.jsonl"
DATA_DIR = Path(os.environ.get("TA_SHARED_DATA", REPO.parent / "shared" / "data")) / "ohlcv"
POSITIVE = ("invented", "look_ahead")


def load(path: Path = LABELLED) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def _sources(ticker: str, day: dt.date, data_dir: Path) -> list:
    from actors.ports import MarketDesk
    from cli.options import vendor_chains
    from events.config import RunConfig
    from projections.grounding import Source
    config = RunConfig(ticker=ticker, trade_date=day, data_dir=str(data_dir),
                       vendors=vendor_chains(None, str(data_dir), True))
    desk = MarketDesk(None)
    snapshot = await desk.snapshot(config)
    arguments = {"symbol": ticker, "start_date": str(day - dt.timedelta(days=30)),
                 "end_date": str(day)}
    [(result, problem, _)] = await desk.call_tools([("get_stock_data", arguments)], day, config)
    if snapshot is None or result is None:
        raise SystemExit(f"no prices for {ticker} on {day} in {data_dir}: {problem}")
    call = f"get_stock_data({', '.join(f'{k}={v}' for k, v in arguments.items())})"
    return [Source("snapshot", snapshot.render()),
            Source("tool:0:0", f"{call}\n{result.text}")]


def sources_for(rows: Iterable[dict], data_dir: Path = DATA_DIR) -> dict[tuple[str, str], list]:
    """(ticker, trade date) -> the sources an analyst of that run is shown."""
    keys = sorted({(r["ticker"], r["trade_date"]) for r in rows})

    async def every() -> list[list]:
        return [await _sources(t, dt.date.fromisoformat(d), data_dir) for t, d in keys]
    return dict(zip(keys, asyncio.run(every()), strict=True))


def measure(rows: list[dict], sources: dict[tuple[str, str], list]) -> dict:
    """Confusion counts, precision and recall of 'ungrounded or look-ahead' detection, and
    the sentences the audit got wrong."""
    from projections.grounding import FLAGGED, classify
    tp = fp = fn = tn = look_ahead_named = 0
    wrong = []
    for r in rows:
        findings = classify(r["text"], sources[(r["ticker"], r["trade_date"])],
                            dt.date.fromisoformat(r["trade_date"]), r["ticker"])
        flagged = any(f.verdict in FLAGGED for f in findings)
        positive = r["label"] in POSITIVE
        tp, fp = tp + (flagged and positive), fp + (flagged and not positive)
        fn, tn = fn + (positive and not flagged), tn + (not flagged and not positive)
        if r["label"] == "look_ahead" and any(f.verdict == "look_ahead" for f in findings):
            look_ahead_named += 1
        if flagged != positive:
            wrong.append({"label": r["label"], "text": r["text"], "findings": [
                (f.claim.raw, f.verdict, f.source) for f in findings]})
    n_ahead = sum(r["label"] == "look_ahead" for r in rows)
    return {"sentences": len(rows), "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": round(tp / (tp + fp), 3) if tp + fp else 1.0,
            "recall": round(tp / (tp + fn), 3) if tp + fn else 1.0,
            "look_ahead_named": f"{look_ahead_named}/{n_ahead}", "wrong": wrong}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labelled", type=Path, default=LABELLED)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args()
    rows = load(args.labelled)
    result = measure(rows, sources_for(rows, args.data_dir))
    for w in result["wrong"]:
        print(f"{w['label']:>10}  {w['text']}\n            {w['findings']}")
    print(json.dumps({k: v for k, v in result.items() if k != "wrong"}))


if __name__ == "__main__":
    main()
