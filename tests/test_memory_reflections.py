"""Reflections judge the call that was made: the prompt states the rating and the thesis, and
the offline reflector uses that rating, for every rating and every sign of the outcome. The
memory log exports as markdown. (No Ray: the prompt builder and the offline model directly.)"""
from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from actors import prompts
from events.decisions import PortfolioDecision
from events.rating import Rating
from events.records import Message
from projections.memory import MemoryEntry, Outcome, render_markdown, thesis_of
from providers import offline
from providers.base import LLMRequest

THESIS = ("Trend and momentum agree while a Sell-off in peers is priced in. Second sentence "
          "is not quoted.")
#: Written out here, independently of events.rating.call_was_right.
RIGHT = {
    ("Buy", 1): True, ("Buy", -1): False, ("Buy", 0): False,
    ("Overweight", 1): True, ("Overweight", -1): False, ("Overweight", 0): False,
    ("Hold", 1): False, ("Hold", -1): False, ("Hold", 0): True,
    ("Underweight", 1): False, ("Underweight", -1): True, ("Underweight", 0): False,
    ("Sell", 1): False, ("Sell", -1): True, ("Sell", 0): False,
}


def _decision(rating: Rating) -> str:
    return PortfolioDecision(rating=rating, executive_summary="Summary naming a Hold elsewhere.",
                             investment_thesis=THESIS, price_target=101.5,
                             time_horizon="1 week").render()


@pytest.mark.parametrize("rating,sign", sorted(RIGHT))
def test_reflection_states_and_judges_the_rating_that_was_given(rating, sign):
    alpha = 0.03 * sign
    decision = _decision(Rating(rating))
    prompt = prompts.reflection_message(
        ticker="AAPL", trade_date="2024-01-05", decision=decision, raw=alpha + 0.004,
        alpha=alpha, benchmark="SPY", days=5, rating=rating, thesis=thesis_of(decision))
    assert f"\nRating: {rating}\n" in prompt and f"Thesis: {THESIS}" in prompt
    request = LLMRequest(model="offline/quick", role="reflector", messages=[
        Message(role="system", content=prompts.SYSTEM["reflector"]),
        Message(role="user", content=prompt)])
    text = asyncio.run(offline.complete(request)).text
    assert f"The {rating} call on AAPL returned {alpha + 0.004:+.2%} with alpha {alpha:+.2%}" \
        in text
    others = [r.value for r in Rating if r.value != rating]
    assert not any(f"The {other} call" in text or f"the {other} call" in text
                   for other in others)
    verdict = (f"The outcome bore out the {rating} call." if RIGHT[(rating, sign)] else
               f"The outcome went against the {rating} call.")
    assert verdict in text
    assert 'thesis "Trend and momentum agree while a Sell-off in peers is priced in".' in text
    assert "Second sentence" not in text and text.count("Lesson:") == 1


def test_memory_log_exports_as_markdown():
    outcome = Outcome(raw_return=-0.0213, benchmark="SPY", benchmark_return=0.0042,
                      alpha=-0.0255, holding_days=5, resolved_on=dt.date(2024, 1, 12))
    entries = [
        MemoryEntry("NVDA-2", "NVDA", dt.date(2024, 1, 9), "Buy", _decision(Rating.BUY)),
        MemoryEntry("AAPL-1", "AAPL", dt.date(2024, 1, 5), "Sell", _decision(Rating.SELL),
                    outcome, "The Sell call on AAPL was right."),
    ]
    text = render_markdown(entries)
    assert text.startswith("# Memory log\n\n2 decisions, 1 resolved.")
    assert "| 2024-01-05 | AAPL | Sell | -2.13% | -2.55% | SPY | 5 | `AAPL-1` |" in text
    assert "| 2024-01-09 | NVDA | Buy | — | — | — | — | `NVDA-2` |" in text
    assert text.index("## 2024-01-05 · AAPL · Sell") < text.index("## 2024-01-09 · NVDA · Buy")
    assert "The Sell call on AAPL was right." in text and "pending: the holding" in text
    assert render_markdown([]).startswith("# Memory log\n\n0 decisions, 0 resolved.")
