"""Scoring past decisions against what the market did next, and the lessons drawn from them.

Plain Python over the ports. Outcomes and reflections are appended to the ``memory`` stream
with a key per scored run, so two drivers scoring the same decision at once write it once.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from actors import prompts
from actors.ports import LLMPort, MarketPort, StorePort
from actors.turns import completed_call, llm_request
from events import domain as d
from events.envelope import NewEvent
from events.records import Message
from projections.memory import MEMORY_STREAM, MemoryEntry, past_context, thesis_of
from projections.views import entries_from_rows

ACTOR = "coordinator"


class OutcomeScorer:
    def __init__(self, *, store: StorePort, llm: LLMPort, market: MarketPort):
        self.store, self.llm, self.market = store, llm, market

    async def past_context(self, config: Any) -> tuple[str, int]:
        """Score what can be scored for this ticker, then the context knowable on its date:
        both read the memory read model by ticker and date, whatever the store's size."""
        await self.resolve(config, config.ticker)
        rows = await self.store.query("past_context", {"ticker": config.ticker,
                                                       "trade_date": config.trade_date})
        return past_context(entries_from_rows(rows), config.ticker, config.trade_date)

    async def resolve(self, config: Any, ticker: str | None = None,
                      today: dt.date | None = None) -> int:
        """Score pending decisions (of ``ticker``, or all) whose holding period has data."""
        today = today or dt.date.today()
        if ticker:
            rows = await self.store.query("pending", {"ticker": ticker,
                                                      "before": config.trade_date})
        else:
            rows = await self.store.query("pending_all", {})
        pending = entries_from_rows(rows)
        resolved = 0
        for entry in pending:
            outcome = await self._outcome(config, entry, today)
            if outcome is None:
                continue
            call = await self._reflect(config, entry, outcome)
            reflection = d.ReflectionRecorded(run_id=entry.run_id, ticker=entry.ticker,
                                              trade_date=entry.trade_date,
                                              reflection=call.response_text.strip(),
                                              model=call.model)
            events = [NewEvent(outcome, ACTOR), NewEvent(call, "role:reflector"),
                      NewEvent(reflection, "role:reflector")]
            await self.store.append(MEMORY_STREAM, events,
                                    idempotency_key=f"outcome:{entry.run_id}")
            resolved += 1
        return resolved

    async def _reflect(self, config: Any, entry: MemoryEntry,
                       outcome: d.OutcomeResolved) -> d.LLMCallCompleted:
        content = prompts.reflection_message(
            ticker=entry.ticker, trade_date=str(entry.trade_date), decision=entry.decision,
            raw=outcome.raw_return, alpha=outcome.alpha, benchmark=outcome.benchmark,
            days=outcome.holding_days, rating=entry.rating, thesis=thesis_of(entry.decision))
        messages = [Message(role="system", content=prompts.SYSTEM["reflector"]),
                    Message(role="user", content=content)]
        request = llm_request(config, "reflector", messages, [], None)
        reply = await self.llm.complete(request)
        return completed_call(f"reflect:{entry.run_id}", "reflector", 0, request, reply)

    async def _outcome(self, config: Any, m: MemoryEntry, today: dt.date
                       ) -> d.OutcomeResolved | None:
        holding = config.holding_days
        window_end = m.trade_date + dt.timedelta(days=holding * 7 // 5 + 5)
        cfg = config.model_copy(update={"ticker": m.ticker, "trade_date": m.trade_date})
        try:
            closes = await self.market.closes(cfg, m.ticker, m.trade_date, window_end)
            benchmark = await self.market.benchmark_for(cfg)
            bench = await self.market.closes(cfg, benchmark, m.trade_date, window_end)
        except Exception:  # noqa: BLE001 - stays pending; tried again next time
            return None
        closes = [(day, c) for day, c in closes if day >= m.trade_date]
        complete = len(closes) > holding or window_end < today
        if len(closes) < 2 or not complete or not bench:
            return None
        k = min(holding, len(closes) - 1)
        (d0, c0), (dk, ck) = closes[0], closes[k]
        b0, bk = close_on(bench, d0), close_on(bench, dk)
        if b0 is None or bk is None:
            return None
        raw, bench_raw = ck / c0 - 1, bk / b0 - 1
        return d.OutcomeResolved(run_id=m.run_id, ticker=m.ticker, trade_date=m.trade_date,
                                 rating=m.rating, raw_return=raw, benchmark=benchmark,
                                 benchmark_return=bench_raw, alpha=raw - bench_raw,
                                 holding_days=k, resolved_on=dk)


def close_on(series: list[tuple[dt.date, float]], day: dt.date) -> float | None:
    """Close on ``day``, or the last one before it (benchmarks trade on other holidays)."""
    before = [c for dd, c in series if dd <= day]
    return before[-1] if before else None
