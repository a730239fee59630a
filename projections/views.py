"""Read models across runs, as pure definitions: which rows each event changes, and the named
queries that read them. The recorder that keeps them in DuckDB is events.views (generic).

NOTE FOR THE COORDINATOR (past context and pending outcomes without folding the history):

    from projections.views import entries_from_rows
    from projections.memory import past_context
    rows = await store.query.remote("past_context", {"ticker": c.ticker,
                                                     "trade_date": c.trade_date})
    text, n = past_context(entries_from_rows(rows), c.ticker, c.trade_date)  # same text as before
    pending = entries_from_rows(await store.query.remote(
        "pending", {"ticker": ticker, "before": config.trade_date}))      # == pending_for(...)
    pending = entries_from_rows(await store.query.remote("pending_all", {}))  # not m.resolved

``store`` is the StoreRef the coordinator already has (``query(path, name, params)`` on the
store actor). Every query first catches the read models up with every committed event, so it
reflects the appends that returned before it. Rows are plain dicts; ``entries_from_rows``
turns memory rows into ``MemoryEntry`` objects (outcome included) in decision order.

Views (bump a view's ``version`` when its rows change meaning: it is rebuilt from events on
the next open):
* ``runs``   one row per run: status, ticker, date, rating, models, timestamps, fork source;
* ``memory`` one row per run; a row with a decision is a memory entry (same semantics as
  projections.memory.memory_entries), its outcome and reflection filled in when resolved;
* ``calls``  one row per model call (LLMCallCompleted / LLMCallFailed), fork copies left out
  (paid for once, by the source run): `stats` is a GROUP BY over it;
* ``grounding`` one row per GroundingChecked (fork copies left out): the grounding rates
  `stats` shows next to the usage.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from events.envelope import StoredEvent, utc
from events.views import NOT_NULL, Change, Insert, Ref, Table, Update, View
from projections.memory import MemoryEntry, Outcome
from projections.runs import RUN_SUMMARY_TYPES, RunSummary
from projections.usage import USAGE_TYPES, UsageRow

RUNS, MEMORY, CALLS = "view_runs", "view_memory", "view_calls"
N_SAME, N_CROSS = 5, 3  # past_context's defaults: same ticker, other tickers


def _ts(moment: dt.datetime) -> dt.datetime:
    """Stored as naive UTC (TIMESTAMP); read back with ``_aware``."""
    return utc(moment).replace(tzinfo=None)


def _aware(moment: dt.datetime | None) -> dt.datetime | None:
    return None if moment is None else moment.replace(tzinfo=dt.UTC)


# ---- runs -------------------------------------------------------------------------------------
def run_changes(e: StoredEvent) -> list[Change]:
    from events import domain as d  # late: read-model queries need no pydantic
    p, key, now = e.payload, {"run_id": e.stream}, _ts(e.recorded_at)
    match p:
        case d.RunRequested():
            c = p.config
            return [Insert(RUNS, {
                "run_id": e.stream, "ticker": c.ticker, "trade_date": c.trade_date,
                "status": "incomplete", "rating": None, "quick_model": c.quick_model,
                "deep_model": c.deep_model, "requested_at": now, "updated_at": now,
                "requested_position": e.position, "reason": None,
                "forked_from": p.forked_from})]
        case d.RunResumed():
            values: dict[str, Any] = {"status": "incomplete", "reason": None}
        case d.PortfolioDecisionIssued():
            values = {"rating": p.decision.rating.value}
        case d.RunCompleted():
            values = {"status": "completed", "rating": p.rating.value}
        case d.RunFailed():
            values = {"status": "failed", "reason": f"{p.kind}: {p.reason}"}
        case _:
            return []
    return [Update(RUNS, key, values | {"updated_at": now})]


_CALL_SUMS = ("count(*) FILTER (WHERE NOT failed) AS calls, "
              "count(*) FILTER (WHERE failed) AS failed, "
              "coalesce(sum(attempts), 0) AS attempts, "
              "coalesce(sum(input_tokens), 0) AS input_tokens, "
              "coalesce(sum(output_tokens), 0) AS output_tokens, "
              "coalesce(sum(cost_usd), 0.0) AS cost_usd, "
              "coalesce(sum(latency_ms), 0.0) AS latency_ms")

RUNS_VIEW = View(
    name="runs", version=1, types=RUN_SUMMARY_TYPES, changes=run_changes,
    tables=[Table(RUNS, [
        ("run_id", "VARCHAR"), ("ticker", "VARCHAR"), ("trade_date", "DATE"),
        ("status", "VARCHAR"), ("rating", "VARCHAR"), ("quick_model", "VARCHAR"),
        ("deep_model", "VARCHAR"), ("requested_at", "TIMESTAMP"), ("updated_at", "TIMESTAMP"),
        ("requested_position", "BIGINT"), ("reason", "VARCHAR"), ("forked_from", "VARCHAR")],
        indexes=[("run_id",), ("requested_position",)])],
    queries={
        # newest first; NULL ticker / status = any; the usage of the listed runs only
        "runs": f"""
            WITH listed AS (
                SELECT * FROM {RUNS}
                WHERE ($ticker IS NULL OR ticker = $ticker)
                  AND ($status IS NULL OR status = $status)
                ORDER BY requested_position DESC LIMIT $limit)
            SELECT listed.*, {', '.join(f'coalesce(u.{c}, 0) AS {c}' for c in (
                'calls', 'failed', 'input_tokens', 'output_tokens', 'cost_usd'))}
            FROM listed LEFT JOIN (
                SELECT run_id, {_CALL_SUMS} FROM {CALLS}
                WHERE run_id IN (SELECT run_id FROM listed) GROUP BY run_id) u USING (run_id)
            ORDER BY requested_position DESC""",
        "run": f"SELECT * FROM {RUNS} WHERE run_id = $run_id",
    })


def run_summary(row: Mapping[str, Any]) -> RunSummary:
    return RunSummary(row["run_id"], row["ticker"], row["trade_date"], row["status"],
                      row["rating"], _aware(row["requested_at"]), _aware(row["updated_at"]),
                      row["reason"])


# ---- memory -----------------------------------------------------------------------------------
_OUTCOME = ("raw_return", "benchmark", "benchmark_return", "alpha", "holding_days",
            "resolved_on")
_CLEARED = dict.fromkeys(("rating", "decision", "decided_position", *_OUTCOME, "reflection"))


def memory_changes(e: StoredEvent) -> list[Change]:
    from events import domain as d  # late: read-model queries need no pydantic
    p = e.payload
    match p:
        case d.RunRequested():
            return [Insert(MEMORY, {"run_id": e.stream, "ticker": p.config.ticker,
                                    "trade_date": p.config.trade_date,
                                    "requested_position": e.position})]
        case d.PortfolioDecisionIssued():
            # a later decision for the same (ticker, date) replaces the earlier unresolved one
            same_run = {"run_id": e.stream}
            return [
                Update(MEMORY, {"ticker": Ref(MEMORY, "ticker", same_run),
                                "trade_date": Ref(MEMORY, "trade_date", same_run),
                                "decision": NOT_NULL, "resolved_on": None}, _CLEARED),
                Update(MEMORY, same_run, _CLEARED | {
                    "rating": p.decision.rating.value, "decision": p.decision.render(),
                    "decided_position": e.position})]
        case d.OutcomeResolved():
            return [Update(MEMORY, {"run_id": p.run_id, "decision": NOT_NULL},
                           {k: getattr(p, k) for k in _OUTCOME})]
        case d.ReflectionRecorded():
            return [Update(MEMORY, {"run_id": p.run_id, "decision": NOT_NULL},
                           {"reflection": p.reflection})]
    return []


_ENTRY = f"SELECT * FROM {MEMORY} WHERE decision IS NOT NULL"
_KNOWN = "decision IS NOT NULL AND resolved_on <= $trade_date AND trade_date < $trade_date"

MEMORY_VIEW = View(
    name="memory", version=1, changes=memory_changes,
    types=("RunRequested", "PortfolioDecisionIssued", "OutcomeResolved", "ReflectionRecorded"),
    tables=[Table(MEMORY, [
        ("run_id", "VARCHAR"), ("ticker", "VARCHAR"), ("trade_date", "DATE"),
        ("requested_position", "BIGINT"), ("decided_position", "BIGINT"), ("rating", "VARCHAR"),
        ("decision", "VARCHAR"), ("raw_return", "DOUBLE"), ("benchmark", "VARCHAR"),
        ("benchmark_return", "DOUBLE"), ("alpha", "DOUBLE"), ("holding_days", "INTEGER"),
        ("resolved_on", "DATE"), ("reflection", "VARCHAR")],
        indexes=[("ticker", "trade_date"), ("run_id",)])],
    queries={
        # every entry, in decision order (what memory_entries returns)
        "memory": f"{_ENTRY} ORDER BY decided_position",
        "memory_of_ticker": f"{_ENTRY} AND ticker = $ticker ORDER BY decided_position",
        "memory_of_runs": f"{_ENTRY} AND list_contains($run_ids, run_id) "
                          "ORDER BY decided_position",
        # entries knowable on trade_date: newest first, N_SAME of the ticker, N_CROSS others
        "past_context": f"""
            SELECT * FROM (
                (SELECT * FROM {MEMORY} WHERE ticker = $ticker AND {_KNOWN}
                 ORDER BY trade_date DESC, decided_position LIMIT {N_SAME})
                UNION ALL
                (SELECT * FROM {MEMORY} WHERE ticker <> $ticker AND {_KNOWN}
                 ORDER BY trade_date DESC, decided_position LIMIT {N_CROSS}))
            ORDER BY ticker <> $ticker, trade_date DESC, decided_position""",
        # unresolved decisions on ticker made before `before` (projections.memory.pending_for)
        "pending": f"{_ENTRY} AND resolved_on IS NULL AND ticker = $ticker "
                   "AND trade_date < $before ORDER BY decided_position",
        "pending_all": f"{_ENTRY} AND resolved_on IS NULL ORDER BY decided_position",
    })


def entry_from_row(row: Mapping[str, Any]) -> MemoryEntry:
    outcome = None
    if row["resolved_on"] is not None:
        outcome = Outcome(**{k: row[k] for k in _OUTCOME})
    return MemoryEntry(row["run_id"], row["ticker"], row["trade_date"], row["rating"],
                       row["decision"], outcome, row["reflection"])


def entries_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[MemoryEntry]:
    return [entry_from_row(r) for r in rows]


# ---- calls (usage) ----------------------------------------------------------------------------
def call_changes(e: StoredEvent) -> list[Change]:
    from events import domain as d  # late: read-model queries need no pydantic
    p = e.payload
    if not isinstance(p, d.LLMCallCompleted | d.LLMCallFailed) or e.actor == "fork":
        return []  # a fork's copies were paid for once, by the run they came from
    failed = isinstance(p, d.LLMCallFailed)
    return [Insert(CALLS, {
        "position": e.position, "run_id": e.stream, "model": p.model,
        "provider": getattr(p, "provider", None) or p.model.partition("/")[0],
        "role": p.role, "day": utc(e.recorded_at).date().isoformat(),
        "input_tokens": 0 if failed else p.input_tokens,
        "output_tokens": 0 if failed else p.output_tokens,
        "cost_usd": 0.0 if failed else p.cost_usd,
        "latency_ms": 0.0 if failed else p.latency_ms,
        "attempts": max(1, len(p.attempts)), "failed": failed})]


#: `stats --by X` groups on this column.
STATS_GROUPS = {"model": "model", "provider": "provider", "role": "role", "day": "day",
                "run": "run_id"}

CALLS_VIEW = View(
    name="calls", version=1, types=USAGE_TYPES, changes=call_changes,
    tables=[Table(CALLS, [
        ("position", "BIGINT"), ("run_id", "VARCHAR"), ("model", "VARCHAR"),
        ("provider", "VARCHAR"), ("role", "VARCHAR"), ("day", "VARCHAR"),
        ("input_tokens", "BIGINT"), ("output_tokens", "BIGINT"), ("cost_usd", "DOUBLE"),
        ("latency_ms", "DOUBLE"), ("attempts", "INTEGER"), ("failed", "BOOLEAN")],
        indexes=[("run_id",)])],
    queries={f"stats_by_{by}": f"SELECT {col} AS key, {_CALL_SUMS} FROM {CALLS} "
                               f"GROUP BY {col} ORDER BY {col}"
             for by, col in STATS_GROUPS.items()})


# ---- grounding (per output) -------------------------------------------------------------------
GROUNDING = "view_grounding"


def grounding_changes(e: StoredEvent) -> list[Change]:
    if e.type != "GroundingChecked" or e.actor == "fork":
        return []  # a fork's copies were audited once, in the run they came from
    p: Any = e.payload  # a GroundingChecked
    return [Insert(GROUNDING, {
        "position": e.position, "run_id": e.stream, "model": p.model,
        "provider": p.model.partition("/")[0], "role": p.role,
        "day": utc(e.recorded_at).date().isoformat(), "figures": p.checked,
        "grounded": p.grounded, "derived": p.derived, "ungrounded": p.ungrounded,
        "look_ahead": p.look_ahead})]


_GROUNDING_SUMS = ("count(*) AS outputs, sum(figures) AS figures, sum(grounded) AS grounded, "
                   "sum(derived) AS derived, sum(ungrounded) AS ungrounded, "
                   "sum(look_ahead) AS look_ahead")

GROUNDING_VIEW = View(
    name="grounding", version=1, types=("GroundingChecked",), changes=grounding_changes,
    tables=[Table(GROUNDING, [
        ("position", "BIGINT"), ("run_id", "VARCHAR"), ("model", "VARCHAR"),
        ("provider", "VARCHAR"), ("role", "VARCHAR"), ("day", "VARCHAR"),
        ("figures", "INTEGER"), ("grounded", "INTEGER"), ("derived", "INTEGER"),
        ("ungrounded", "INTEGER"), ("look_ahead", "INTEGER")], indexes=[("run_id",)])],
    queries={f"grounding_by_{by}": f"SELECT {col} AS key, {_GROUNDING_SUMS} FROM {GROUNDING} "
                                   f"GROUP BY {col} ORDER BY {col}"
             for by, col in STATS_GROUPS.items()})


@dataclass(frozen=True, slots=True)
class GroundingRate:
    """The grounding audit's figures for one group of outputs (`stats` shows them)."""
    outputs: int = 0
    figures: int = 0
    grounded: int = 0
    derived: int = 0
    ungrounded: int = 0
    look_ahead: int = 0

    @property
    def rate(self) -> float | None:
        """Share of figures grounded or derived (None: no figure checked)."""
        return (self.grounded + self.derived) / self.figures if self.figures else None


def grounding_rates(rows: Iterable[Mapping[str, Any]]) -> dict[str, GroundingRate]:
    return {r["key"]: GroundingRate(*(int(r[k] or 0) for k in (
        "outputs", "figures", "grounded", "derived", "ungrounded", "look_ahead")))
        for r in rows}


def usage_row(row: Mapping[str, Any]) -> UsageRow:
    return UsageRow(row["key"], int(row["calls"]), int(row["failed"]), int(row["attempts"]),
                    int(row["input_tokens"]), int(row["output_tokens"]), float(row["cost_usd"]),
                    float(row["latency_ms"]))


#: Every read model, in the order they are applied.
VIEWS: tuple[View, ...] = (RUNS_VIEW, MEMORY_VIEW, CALLS_VIEW, GROUNDING_VIEW)
