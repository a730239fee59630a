"""Whole runs on real Ray and real DuckDB files, offline model, real prices (local files)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from events.duckdb_store import DuckDBEventStore
from events.rating import Rating
from events.roles import OUTPUT_OF_ROLE
from projections.reports import render_reports
from projections.run_state import project

ROLES_12 = set(OUTPUT_OF_ROLE)  # every role that answers turns (the reflector does not)


def run_json(cli, *args):
    result = cli("run", *args, "--json")
    rows = json.loads(result.stdout)
    return result, rows


def read(store_path: Path, run_id: str):
    with DuckDBEventStore(store_path, read_only=True) as store:
        return store.read_stream(run_id), store.verify(run_id)


def test_full_run_on_real_data(cli, ohlcv_dir, store_path, tmp_path):
    result, rows = run_json(cli, "NVDA", "--date", "2024-05-10", "--data-dir", ohlcv_dir,
                            "--debate-rounds", "2", "--risk-rounds", "2", "--store", store_path,
                            "--out", tmp_path / "reports")
    assert result.exit_code == 0, result.output
    (row,) = rows
    assert row["status"] == "completed" and row["rating"] in {r.value for r in Rating}
    events, verification = read(store_path, row["run_id"])
    assert verification.ok and [e.seq for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert types[:5] == ["RunRequested", "RunDriven", "InstrumentResolved",
                         "MarketSnapshotTaken", "PastContextLoaded"]
    assert types[-3:] == ["PortfolioDecisionIssued", "GroundingChecked", "RunCompleted"]
    spoke = {e.actor.removeprefix("role:") for e in events if e.type in (
        "AnalystReportSubmitted", "DebateArgumentMade", "InvestmentPlanIssued", "TradeProposed",
        "RiskArgumentMade", "PortfolioDecisionIssued")}
    assert spoke == ROLES_12
    debate = [(e.payload.speaker, e.payload.round) for e in events
              if e.type == "DebateArgumentMade"]
    assert debate == [("bull", 1), ("bear", 1), ("bull", 2), ("bear", 2)]
    risk = [(e.payload.speaker, e.payload.round) for e in events if e.type == "RiskArgumentMade"]
    assert risk == [(s, r) for r in (1, 2) for s in ("aggressive", "conservative", "neutral")]
    # every role output answers a turn that was assigned before it
    assigned = {e.payload.turn_id: e.seq for e in events if e.type == "TurnAssigned"}
    for e in events:
        if e.type.endswith(("Submitted", "Made", "Issued", "Proposed")):
            assert assigned[e.payload.turn_id] < e.seq and e.causation_id == e.payload.turn_id
    # the snapshot is the real last bar on or before the trade date (2024-05-10 is a Friday)
    snap = events[3].payload.snapshot
    assert str(snap.last_bar.date) == "2024-05-10" and snap.vendor == "local"
    csv_row = next(line for line in (ohlcv_dir / "NVDA.csv").read_text().splitlines()
                   if line.startswith("2024-05-10"))
    assert abs(float(csv_row.split(",")[4]) - snap.last_bar.close) < 1e-6
    # analysts called real tools and quote what came back
    tools = [e.payload for e in events if e.type == "ToolCallCompleted"]
    assert {t.role for t in tools} >= {"market", "fundamentals"}
    market_report = next(e.payload.report for e in events if e.type == "AnalystReportSubmitted"
                         and e.payload.analyst == "market")
    assert f"{snap.last_bar.close:.2f}" in market_report
    # reports rebuilt from the events are byte-identical to those written at the end
    written = tmp_path / "reports" / row["run_id"]
    rebuilt = render_reports(project(events))
    assert len(rebuilt) == 13  # 4 analysts, bull, bear, manager, trader, 3 risk, PM, complete
    for rel, text in rebuilt.items():
        assert (written / rel).read_text(encoding="utf-8") == text
    assert "Offline model" in rebuilt["complete_report.md"]


def test_three_tickers_in_parallel_never_mix(cli, ohlcv_dir, store_path, tmp_path):
    listing = tmp_path / "tickers.txt"
    listing.write_text("# my watch list\nMSFT   # software\nnvda\n")
    result, rows = run_json(cli, "AAPL", "--tickers-file", listing, "--date", "2023-03-01",
                            "--data-dir", ohlcv_dir, "--store", store_path)
    assert result.exit_code == 0, result.output
    assert [r["ticker"] for r in rows] == ["AAPL", "MSFT", "NVDA"]
    assert all(r["status"] == "completed" for r in rows)
    closes = set()
    for row in rows:
        events, verification = read(store_path, row["run_id"])
        assert verification.ok
        assert {e.stream for e in events} == {row["run_id"]}
        assert events[0].payload.config.ticker == row["ticker"]
        snapshot = next(e.payload.snapshot for e in events if e.type == "MarketSnapshotTaken")
        assert snapshot.symbol == row["ticker"]
        closes.add(snapshot.last_bar.close)
        tickers_in_tools = {e.payload.arguments.get("symbol") or e.payload.arguments.get("ticker")
                            for e in events if e.type == "ToolCallCompleted"}
        assert tickers_in_tools - {None} == {row["ticker"]}
        assert Counter(e.type for e in events)["RunCompleted"] == 1
    assert len(closes) == 3


def test_replay_and_report_from_events_alone(cli, ohlcv_dir, store_path, tmp_path):
    _, rows = run_json(cli, "MSFT", "--date", "2024-01-05", "--data-dir", ohlcv_dir,
                       "--store", store_path, "--out", tmp_path / "first")
    run_id = rows[0]["run_id"]
    replay = cli("replay", run_id, "--store", store_path, "--json")
    assert replay.exit_code == 0, replay.output
    audit = json.loads(replay.stdout)
    assert audit["verified"] is True and audit["decision_matches"] is True
    assert audit["rating"] == rows[0]["rating"]
    events, _ = read(store_path, run_id)
    assert [e["seq"] for e in audit["events"]] == [e.seq for e in events]
    assert audit["events"][0]["payload"]["config"]["ticker"] == "MSFT"
    text = cli("replay", run_id, "--store", store_path)
    assert "hash chain: intact" in text.stdout and "PortfolioDecisionIssued" in text.stdout
    out = tmp_path / "again"
    rep = cli("report", run_id, "--store", store_path, "--out", out)
    assert rep.exit_code == 0
    for path in (tmp_path / "first" / run_id).rglob("*.md"):
        rel = path.relative_to(tmp_path / "first" / run_id)
        assert (out / rel).read_bytes() == path.read_bytes()
    assert (out / "1_analysts" / "market.md").exists() and (out / "5_portfolio" / "decision.md").exists()
    listing = json.loads(cli("runs", "--store", store_path, "--json").stdout)
    assert [(r["run_id"], r["status"], r["rating"]) for r in listing] == [
        (run_id, "completed", rows[0]["rating"])]


def test_verify_command_checks_the_whole_store(cli, ohlcv_dir, store_path):
    _, rows = run_json(cli, "AAPL", "--date", "2022-06-01", "--data-dir", ohlcv_dir,
                       "--analysts", "market", "--store", store_path)
    ok = cli("verify", "--store", store_path, "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["ok"] is True
    import duckdb
    con = duckdb.connect(str(store_path))
    con.execute("UPDATE events SET payload = replace(payload, 'AAPL', 'MSFT') "
                "WHERE type = 'MarketSnapshotTaken'")
    con.close()
    bad = cli("verify", "--store", store_path, "--json")
    report = json.loads(bad.stdout)
    assert bad.exit_code == 1 and report["ok"] is False
    (problem,) = report["problems"]
    assert problem["stream"] == rows[0]["run_id"] and problem["first_bad_seq"] == 4  # RunRequested,
    # RunDriven, InstrumentResolved, then the edited MarketSnapshotTaken
    replay = json.loads(cli("replay", rows[0]["run_id"], "--store", store_path, "--json").stdout)
    assert replay["verified"] is False and "altered" in replay["problem"]
