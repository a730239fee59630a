"""The coordinator's rules as pure functions: who is next, and what is out of turn."""
from __future__ import annotations

import datetime as dt
import itertools

import pytest

from events import domain as d
from events.config import ANALYSTS, RunConfig
from events.decisions import PortfolioDecision, ResearchPlan, TradeProposal
from events.records import Instrument
from events.roles import DEBATE_ORDER, RISK_ORDER, ROLES
from projections.run_state import project
from projections.schedule import OUTPUT_OF_ROLE, next_step, refusal

SUBSETS = [s for n in range(1, 5) for s in itertools.combinations(ANALYSTS, n)]


def started(analysts, debate, risk):
    config = RunConfig(ticker="NVDA", trade_date=dt.date(2024, 5, 10), analysts=analysts,
                       debate_rounds=debate, risk_rounds=risk)
    return [d.RunRequested(run_id="r", config=config),
            d.InstrumentResolved(instrument=Instrument(ticker="NVDA", symbol="NVDA")),
            d.MarketSnapshotTaken(snapshot=None, note="none"),
            d.PastContextLoaded(text="", entries=0)]


def answer(turn):
    role, t = turn.role, turn.turn_id
    if role in ANALYSTS:
        return d.AnalystReportSubmitted(turn_id=t, analyst=role, report=f"{role} report")
    if role in DEBATE_ORDER:
        return d.DebateArgumentMade(turn_id=t, speaker=role, round=turn.round, argument="x")
    if role in RISK_ORDER:
        return d.RiskArgumentMade(turn_id=t, speaker=role, round=turn.round, argument="y")
    return {
        "research_manager": d.InvestmentPlanIssued(turn_id=t, output_mode="structured", plan=ResearchPlan(
            recommendation="Buy", rationale="r", strategic_actions="s")),
        "trader": d.TradeProposed(turn_id=t, output_mode="structured", proposal=TradeProposal(
            action="Buy", reasoning="r")),
        "portfolio_manager": d.PortfolioDecisionIssued(turn_id=t, output_mode="structured",
                                                       decision=PortfolioDecision(
            rating="Overweight", executive_summary="e", investment_thesis="i")),
    }[role]


def play(analysts, debate, risk):
    """Run the schedule to completion, answering every open turn; return the role order."""
    events = started(analysts, debate, risk)
    order = []
    for _ in range(200):
        step = next_step(project(events))
        if step.kind == "complete":
            return order, events
        assert step.kind == "turns"
        for turn in step.turns:
            events.append(d.TurnAssigned(turn_id=turn.turn_id, role=turn.role, round=turn.round))
        for turn in step.turns:
            out = answer(turn)
            assert refusal(project(events), out) is None
            events.append(out)
            order.append((turn.role, turn.round))
    raise AssertionError("schedule did not finish")


@pytest.mark.parametrize("analysts", SUBSETS, ids=lambda s: "+".join(s))
@pytest.mark.parametrize("rounds", [1, 2, 3, 4, 5])
def test_every_analyst_subset_and_round_count(analysts, rounds):
    order, _ = play(analysts, rounds, rounds)
    roles = [r for r, _ in order]
    assert roles[:len(analysts)] == list(analysts)
    rest = roles[len(analysts):]
    assert rest[:2 * rounds] == ["bull", "bear"] * rounds
    assert [rnd for _, rnd in order[len(analysts):len(analysts) + 2 * rounds]] == [
        i // 2 + 1 for i in range(2 * rounds)]
    assert rest[2 * rounds:2 * rounds + 2] == ["research_manager", "trader"]
    assert rest[2 * rounds + 2:5 * rounds + 2] == ["aggressive", "conservative", "neutral"] * rounds
    assert rest[5 * rounds + 2:] == ["portfolio_manager"]


def test_analysts_run_together_then_debate_alone():
    events = started(ANALYSTS, 1, 1)
    step = next_step(project(events))
    assert [t.role for t in step.turns] == list(ANALYSTS)


def test_context_comes_first():
    config = RunConfig(ticker="NVDA", trade_date=dt.date(2024, 5, 10))
    assert next_step(project([d.RunRequested(run_id="r", config=config)])).kind == "prepare"


def _at_debate():
    events = started(("market",), 2, 1)
    events.append(d.TurnAssigned(turn_id="analyst:market", role="market"))
    events.append(answer(next_step(project(events)).turns[0]))
    events.append(d.TurnAssigned(turn_id="debate:1", role="bull", round=1))
    return events


def test_refuses_wrong_speaker():
    events = _at_debate()
    wrong = d.DebateArgumentMade(turn_id="debate:1", speaker="bear", round=1, argument="me first")
    assert "bull" in refusal(project(events), wrong)


def test_refuses_second_report_from_one_analyst():
    events = _at_debate()
    again = d.AnalystReportSubmitted(turn_id="analyst:market", analyst="market", report="again")
    assert "already answered" in refusal(project(events), again)


def test_refuses_turn_not_open_and_not_assigned():
    events = _at_debate()
    early = d.InvestmentPlanIssued(turn_id="research_manager", output_mode="freetext",
                                   plan=ResearchPlan(recommendation="Hold", rationale="r",
                                                     strategic_actions="s"))
    assert "not open" in refusal(project(events), early)
    unassigned = d.DebateArgumentMade(turn_id="debate:1", speaker="bull", round=1, argument="a")
    assert refusal(project(events[:-1]), unassigned) == "turn debate:1 was never assigned"


def test_refuses_wrong_round_and_anything_after_completion():
    events = _at_debate()
    assert "round" in refusal(project(events), d.DebateArgumentMade(
        turn_id="debate:1", speaker="bull", round=2, argument="a"))
    _, done = play(("news",), 1, 1)
    done.append(d.RunCompleted(rating="Overweight"))
    late = d.DebateArgumentMade(turn_id="debate:3", speaker="bull", round=2, argument="late")
    assert "completed" in refusal(project(done), late)
    assert next_step(project(done)).kind == "done"


def test_every_role_but_the_reflector_answers_turns():
    turn_takers = {n for n, spec in ROLES.items() if spec.stage != "memory"}
    assert set(OUTPUT_OF_ROLE) == turn_takers and len(turn_takers) == 12
    assert set(ANALYSTS) <= turn_takers  # the config's analysts are the table's
