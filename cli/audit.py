"""What `ta-actors replay` checks: the hash chain, and that the decision re-derived from the
recorded model output is the decision the run recorded."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from events import domain as d
from events.decisions import PortfolioDecision
from events.rating import parse_rating
from projections.grounding import run_findings
from projections.reports import render_reports
from projections.run_state import project


@dataclass(frozen=True)
class AuditResult:
    run_id: str
    verified: bool
    problem: str | None
    rating: str | None
    rederived: str | None
    completed_rating: str | None
    decision_matches: bool
    status: str
    reports: dict[str, str]
    grounding: tuple[d.GroundingChecked, ...] = ()  # the audit of each output, in order
    figures: dict[str, list] = field(default_factory=dict)  # turn -> [raw, verdict, source]

    def summary_lines(self) -> list[str]:
        # plain text: stdout prints data, never markup (a problem may contain "[...]")
        chain = "intact" if self.verified else f"BROKEN: {self.problem}"
        match = ("yes" if self.decision_matches else
                 f"no (recorded {self.rating}, completed {self.completed_rating}, "
                 f"re-derived {self.rederived})")
        return [f"hash chain: {chain}", f"status: {self.status}",
                f"rating: {self.rating or '-'}", f"decision re-derived from the model output "
                f"matches the record: {match}",
                f"reports rebuilt: {len(self.reports)} files", self._grounding_line()]

    def _grounding_line(self) -> str:
        if not self.grounding:
            return "grounding: no audit recorded (the run predates it or has no output yet)"
        checked = sum(c.checked for c in self.grounding)
        good = sum(c.grounded + c.derived for c in self.grounding)
        flagged = sum(len(c.flagged) for c in self.grounding)
        rate = f"{good / checked:.1%}" if checked else "-"
        return (f"grounding: {len(self.grounding)} outputs, {checked} figures, {rate} grounded "
                f"or derived, {flagged} flagged")

    def as_json(self, events: list) -> dict:
        return {"run_id": self.run_id, "verified": self.verified, "problem": self.problem,
                "status": self.status, "rating": self.rating,
                "decision_matches": self.decision_matches, "rederived_rating": self.rederived,
                "reports": sorted(self.reports),
                "grounding": [c.model_dump(mode="json") | {"figures": self.figures.get(
                    c.turn_id, [])} for c in self.grounding],
                "events": [{"type": e.type, "seq": e.seq, "position": e.position,
                            "actor": e.actor, "recorded_at": e.recorded_at.isoformat(),
                            "causation_id": e.causation_id, "hash": e.hash,
                            "payload": e.payload.model_dump(mode="json")} for e in events]}


def rederive(events: list) -> str | None:
    """The rating the portfolio manager's recorded reply implies, parsed afresh."""
    calls = [e.payload for e in events if isinstance(e.payload, d.LLMCallCompleted)
             and e.payload.role == "portfolio_manager"]
    if not calls:
        return None
    last = calls[-1]
    if last.structured and last.output_mode != "freetext":
        try:
            return PortfolioDecision.model_validate(last.structured).rating.value
        except ValueError:
            return None
    return parse_rating(last.response_text).value


def audit(run_id: str, events: list, verification: Any) -> AuditResult:
    state = project(events)
    completed = next((e.payload.rating.value for e in events
                      if isinstance(e.payload, d.RunCompleted)), None)
    again = rederive(events)
    matches = state.rating is not None and state.rating == completed == again
    return AuditResult(run_id, verification.ok, verification.problem, state.rating, again,
                       completed, matches, state.status, render_reports(state),
                       tuple(state.grounding.values()),
                       {turn: [[f.claim.raw, f.verdict, f.source] for f in found]
                        for turn, found in run_findings(events).items()})
