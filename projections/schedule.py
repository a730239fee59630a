"""Who acts next, and what is out of turn: pure functions of the run's projection.

The same function serves a fresh run and a resumed one, because it looks only at what the
events say has happened. Order: context -> analysts (in parallel) -> Bull, Bear, ... for
2 x debate_rounds -> Research Manager -> Trader -> Aggressive, Conservative, Neutral, ... for
3 x risk_rounds -> Portfolio Manager -> complete.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from events import domain as d
from events.roles import DEBATE_ORDER, DEEP_ROLES, OUTPUT_OF_ROLE, RISK_ORDER
from projections.run_state import RunState

__all__ = ["DEBATE_ORDER", "DEEP_ROLES", "OUTPUT_OF_ROLE", "RISK_ORDER", "Step", "Turn",
           "next_step", "refusal"]


@dataclass(frozen=True, slots=True)
class Turn:
    turn_id: str
    role: str
    round: int = 1


@dataclass(frozen=True, slots=True)
class Step:
    """What the coordinator must do now. ``turns`` are the turns that should be in progress."""
    kind: Literal["prepare", "turns", "complete", "done"]
    turns: tuple[Turn, ...] = ()


def next_step(s: RunState) -> Step:
    if s.config is None or s.finished:
        return Step("done")
    if s.instrument is None or not s.snapshot_taken or s.past_context is None:
        return Step("prepare")
    pending = tuple(Turn(f"analyst:{a}", a) for a in s.config.analysts if a not in s.reports)
    if pending:
        return Step("turns", pending)
    n = len(s.debate)
    k = len(DEBATE_ORDER)
    if n < k * s.config.debate_rounds:
        return Step("turns", (Turn(f"debate:{n + 1}", DEBATE_ORDER[n % k], n // k + 1),))
    if s.plan is None:
        return Step("turns", (Turn("research_manager", "research_manager"),))
    if s.proposal is None:
        return Step("turns", (Turn("trader", "trader"),))
    m = len(s.risk)
    k = len(RISK_ORDER)
    if m < k * s.config.risk_rounds:
        return Step("turns", (Turn(f"risk:{m + 1}", RISK_ORDER[m % k], m // k + 1),))
    if s.decision is None:
        return Step("turns", (Turn("portfolio_manager", "portfolio_manager"),))
    return Step("complete")


def refusal(s: RunState, e: d.DomainEvent) -> str | None:
    """Why ``e`` may not be appended to the run now, or None if it is in turn."""
    if s.config is None:
        return "the run has not been requested"
    if s.finished and not isinstance(e, d.RunResumed):
        return f"the run is {s.status}; nothing more may be added"
    turn_id = getattr(e, "turn_id", None)
    if turn_id is None or e.type not in OUTPUT_OF_ROLE.values():
        return None  # not a turn output (records, context, lifecycle)
    if turn_id in s.answered:
        return f"turn {turn_id} was already answered"
    step = next_step(s)
    turn = next((t for t in step.turns if t.turn_id == turn_id), None)
    if turn is None:
        return f"turn {turn_id} is not open now (open: {', '.join(t.turn_id for t in step.turns) or 'none'})"
    if turn_id not in s.assigned:
        return f"turn {turn_id} was never assigned"
    if OUTPUT_OF_ROLE[turn.role] != e.type:
        return f"turn {turn_id} belongs to {turn.role}, which answers with {OUTPUT_OF_ROLE[turn.role]}, not {e.type}"
    speaker = getattr(e, "speaker", None) or getattr(e, "analyst", None)
    if speaker is not None and speaker != turn.role:
        return f"turn {turn_id} is {turn.role}'s, not {speaker}'s"
    if getattr(e, "round", turn.round) != turn.round:
        return f"turn {turn_id} is round {turn.round}, not round {e.round}"
    return None


def critical_path_calls(analyst_calls: int, debate_rounds: int, risk_rounds: int) -> int:
    """Sequential LLM calls on the longest path (analysts in parallel count once)."""
    return (analyst_calls + len(DEBATE_ORDER) * debate_rounds + 1 + 1
            + len(RISK_ORDER) * risk_rounds + 1)
