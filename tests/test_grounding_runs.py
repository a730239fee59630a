"""The grounding audit in whole runs (the run driver in this process, no Ray): one
GroundingChecked per output, recomputed from the stream alone; the offline model fully
grounded on real prices; a model that invents figures flagged in the record, in `replay`,
in `report`, in `stats`, and to the research manager who receives them.

The invented figures come from a fake OpenAI-compatible server over real HTTP (the far side
of the network is the only thing faked)."""
from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer, text
from typer.testing import CliRunner

from actors import prompts
from actors.driving import RunDriver
from actors.ports import LocalStore, MarketDesk
from cli.app import app
from cli.options import vendor_chains
from events import domain as d
from events.config import RunConfig
from events.duckdb_store import DuckDBEventStore
from events.envelope import NewEvent
from events.roles import OUTPUT_OF_ROLE
from projections.grounding import check_output, run_findings
from projections.reports import render_reports
from projections.run_state import project
from providers.gateway import LLMGateway

OUTPUTS = set(OUTPUT_OF_ROLE.values())


def drive(store_path: Path, run_id: str, ticker: str, day: str, ohlcv_dir: Path,
          **config) -> list:
    """One whole run on real prices from ../shared/data; its stored events."""
    data = str(ohlcv_dir)
    cfg = RunConfig(ticker=ticker, trade_date=dt.date.fromisoformat(day), data_dir=data,
                    vendors=vendor_chains(None, data, True), **config)
    with DuckDBEventStore(store_path) as store:
        store.append(run_id, [NewEvent(d.RunRequested(run_id=run_id, config=cfg), "cli")],
                     expected_version=0)
        driver = RunDriver(store=LocalStore(store), llm=LLMGateway(), market=MarketDesk(None),
                           owner="test-0/a")
        summary = asyncio.run(driver.drive(run_id))
        assert summary["status"] == "completed", summary
        return store.read_stream(run_id)


def checks_of(events: list) -> list[d.GroundingChecked]:
    return [e.payload for e in events if e.type == "GroundingChecked"]


def assert_one_check_per_output_recomputed_from_the_stream(events: list) -> None:
    outputs = [i for i, e in enumerate(events) if e.type in OUTPUTS]
    assert len(checks_of(events)) == len(outputs) > 0
    for i in outputs:
        output, check = events[i].payload, events[i + 1]
        assert check.type == "GroundingChecked" and check.payload.turn_id == output.turn_id
        # a pure function of the events before the output, and of the output
        assert check_output(project(events[:i]), output) == check.payload
    # the per-figure view (replay --json) agrees with the stored counts
    for turn, found in run_findings(events).items():
        stored = next(c for c in checks_of(events) if c.turn_id == turn)
        assert sum(f.verdict == "grounded" for f in found) == stored.grounded
        assert [(f.claim.raw, f.verdict) for f in found
                if f.verdict in ("ungrounded", "look_ahead")] == stored.flagged


@pytest.mark.parametrize("ticker, day, rounds", [("NVDA", "2024-05-10", 1),
                                                 ("TSLA", "2024-01-19", 2)])
def test_offline_runs_on_real_prices_are_fully_grounded(tmp_path, ohlcv_dir, ticker, day,
                                                        rounds):
    events = drive(tmp_path / "events.duckdb", f"{ticker}-run", ticker, day, ohlcv_dir,
                   debate_rounds=rounds, risk_rounds=rounds)
    assert_one_check_per_output_recomputed_from_the_stream(events)
    checks = checks_of(events)
    assert len(checks) == 4 + 2 * rounds + 2 + 3 * rounds + 1
    assert all(c.checked > 0 and c.flagged == [] for c in checks), [
        (c.role, c.flagged) for c in checks if c.flagged]
    assert sum(c.grounded for c in checks) > 300  # the figures are really checked
    assert {c.model for c in checks} == {"offline/quick", "offline/deep"}
    # the grounded figures name the events they came from
    market = next(c for c in checks if c.role == "market")
    assert "snapshot" in market.sources
    assert any(k.startswith("tool:") for k in market.sources)
    # no audit, no mark: the reports read as before
    assert "**[unverified]**" not in render_reports(project(events))["complete_report.md"]


# ---- a model that invents ---------------------------------------------------------------------
BULL_SAYS = ("The case for owning NVDA is momentum: the close of $89.84 sits above the 50-day "
             "SMA. Better still, by 2024-06-14 the stock had reached $131.83. Data-center "
             "revenue grew 409% to $22.6 billion.")


AGGRESSIVE_SAYS = "Take full size: shares will trade at $150.00 in Q3 2024."


class InventingServer(FakeOpenAIServer):
    """Answers every request plausibly (the fake server's smart replies), except the bull
    and the aggressive risk analyst, who invent."""

    def _choose(self, body: dict) -> dict:
        system = str((body.get("messages") or [{}])[0].get("content") or "")
        for role, says in (("bull", BULL_SAYS), ("aggressive", AGGRESSIVE_SAYS)):
            if system.startswith(prompts.SYSTEM[role]):
                return text(says)
        return super()._choose(body)


def test_invented_figures_are_flagged_marked_counted_and_told(tmp_path, ohlcv_dir,
                                                               monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store_path = tmp_path / "events.duckdb"
    with InventingServer() as server:
        events = drive(store_path, "inv", "NVDA", "2024-05-10", ohlcv_dir,
                       quick_model="openai/test-model", deep_model="openai/test-model",
                       base_url=server.url)
    assert_one_check_per_output_recomputed_from_the_stream(events)
    bull = next(c for c in checks_of(events) if c.role == "bull")
    assert bull.model == "openai/test-model" and bull.grounded >= 1
    assert bull.flagged == [("2024-06-14", "look_ahead"), ("$131.83", "look_ahead"),
                            ("409%", "ungrounded"), ("$22.6 billion", "ungrounded")]
    # the research manager, who receives the debate, is told; its prompt is on record
    (judge,) = [e.payload for e in events if e.type == "LLMCallCompleted"
                and e.payload.role == "research_manager"]
    prompt = judge.messages[1].content
    assert "## Unverified figures" in prompt
    assert "Bull Researcher (round 1): 2024-06-14 (after the trade date); $131.83 (after the " \
           "trade date); 409% (not found in the data); $22.6 billion (not found in the " \
           "data)" in prompt
    # the portfolio manager is told what it received (the risk debate), not the debate
    (decider,) = [e.payload for e in events if e.type == "LLMCallCompleted"
                  and e.payload.role == "portfolio_manager"]
    told = decider.messages[1].content
    assert "Aggressive Risk Analyst (round 1): $150.00 (after the trade date); Q3 2024 " \
           "(after the trade date)" in told
    assert "Bull Researcher" not in told.split("## Unverified figures")[1]
    # ... and the bull's own figures flagged in its report
    state = project(events)
    bull_md = render_reports(state)["2_research/bull.md"]
    assert "2024-06-14 **[look-ahead]**" in bull_md and "409% **[unverified]**" in bull_md
    assert "$89.84 **" not in bull_md

    runner = CliRunner()

    def cli(*args: str):
        result = runner.invoke(app, [*args, "--store", str(store_path)],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    # replay: a grounding table, one row per output, with the flagged figures
    shown = cli("replay", "inv")
    assert "grounding of inv" in shown
    (row,) = [line for line in shown.splitlines() if "│ bull " in line and "debate:1" in line]
    assert "2024-06-14 (look-ahead)" in row and "409% (ungrounded)" in row
    replayed = json.loads(cli("replay", "inv", "--json"))
    assert [g["role"] for g in replayed["grounding"]] == [c.role for c in checks_of(events)]
    # ... each figure with its verdict and the event it came from, recomputed from the events
    (bull_json,) = [g for g in replayed["grounding"] if g["role"] == "bull"]
    assert bull_json["figures"] == [["$89.84", "grounded", "snapshot"],
                                    ["2024-06-14", "look_ahead", None],
                                    ["$131.83", "look_ahead", None], ["409%", "ungrounded", None],
                                    ["$22.6 billion", "ungrounded", None]]
    # report: the markdown marks them
    cli("report", "inv", "--out", str(tmp_path / "reports"))
    assert "$131.83 **[look-ahead]**" in (tmp_path / "reports" / "2_research" / "bull.md"
                                           ).read_text()
    # stats: grounding rates by role and by model, from the read model
    by_role = {r["key"]: r["grounding"] for r in json.loads(cli("stats", "--by", "role",
                                                                "--json"))}
    assert by_role["bull"]["look_ahead"] == 2 and by_role["bull"]["ungrounded"] == 2
    assert by_role["bull"]["rate"] == bull.grounded / bull.checked
    (model,) = json.loads(cli("stats", "--by", "model", "--json"))
    checks = checks_of(events)
    assert model["grounding"]["outputs"] == len(checks)
    assert model["grounding"]["figures"] == sum(c.checked for c in checks)
    assert "grounded" in cli("stats", "--by", "role")


def test_a_run_recorded_before_the_audit_reads_as_before(tmp_path, ohlcv_dir):
    """Stores written before the audit have no GroundingChecked: replay says so, reports
    carry no mark, stats shows no rate, and the deciders' prompts get no note."""
    events = drive(tmp_path / "new.duckdb", "new", "NVDA", "2024-05-10", ohlcv_dir)
    old = [e.payload for e in events if e.type != "GroundingChecked"]
    path = tmp_path / "old.duckdb"
    with DuckDBEventStore(path) as store:
        store.append("old", [NewEvent(p, "cli") for p in old], expected_version=0)
    state = project(old)
    assert state.grounding == {} and prompts.user_message("portfolio_manager", state) == \
        prompts.user_message("portfolio_manager", project(events))
    assert render_reports(state) == render_reports(project(events))
    runner = CliRunner()
    shown = runner.invoke(app, ["replay", "old", "--store", str(path)], catch_exceptions=False)
    assert "grounding: no audit recorded" in shown.stdout and "grounding of" not in shown.stdout
    stats = runner.invoke(app, ["stats", "--by", "role", "--store", str(path), "--json"],
                          catch_exceptions=False)
    assert {r["grounding"]["rate"] for r in json.loads(stats.stdout)} == {None}
