"""The written reports of a run, rendered from its projection alone.

The same function renders them at the end of a run and at replay, so the two are
byte-identical whenever the events are the same (no clocks, no randomness in here).
"""
from __future__ import annotations

from events.roles import ANALYSTS, DEBATE_ORDER, RISK_ORDER, ROLES
from projections.grounding import check_of, mark_flagged
from projections.run_state import RunState, Speech

#: Report titles, from the role table (one place for every fact about a role).
ANALYST_TITLES = {n: ROLES[n].title for n in ANALYSTS}
SPEAKER_TITLES = {n: ROLES[n].title for n in (*DEBATE_ORDER, *RISK_ORDER)}
OFFLINE_NOTE = ("> **Offline model.** These texts were written by ta-actors' deterministic offline "
                "provider from the data shown, not by an LLM. Configure a model for real research.")


def _header(s: RunState) -> str:
    c = s.config
    inst = s.instrument
    name = f" — {inst.name}" if inst and inst.name else ""
    lines = [f"# {c.ticker}{name} · trade date {c.trade_date}", "",
             f"Run `{s.run_id}` · quick model `{c.quick_model}` · deep model `{c.deep_model}`"]
    if inst is not None:
        facts = [f for f in (inst.sector, inst.industry, inst.exchange) if f]
        if facts:
            lines.append("Instrument: " + " · ".join(facts))
        if not inst.available or inst.note:
            lines.append(f"> Identity: {inst.note or 'unavailable; ticker-only context'}")
    if c.is_offline:
        lines += ["", OFFLINE_NOTE]
    return "\n".join(lines) + "\n"


def _speeches(title: str, speeches: tuple[Speech, ...], who: str | None = None,
              s: RunState | None = None) -> str:
    chosen = [sp for sp in speeches if who is None or sp.speaker == who]
    if not chosen:
        return f"## {title}\n\n_No arguments recorded._\n"
    body = "\n\n".join(f"### {SPEAKER_TITLES[sp.speaker]} — round {sp.round}\n\n"
                       f"{_marked(s, sp.text.strip(), turn_id=sp.turn_id)}" for sp in chosen)
    return f"## {title}\n\n{body}\n"


def _marked(s: RunState | None, text: str, *, role: str | None = None,
            turn_id: str | None = None) -> str:
    """``text`` with the figures the grounding audit flagged marked."""
    return text if s is None else mark_flagged(text, check_of(s, role=role, turn_id=turn_id))


def render_reports(s: RunState) -> dict[str, str]:
    """Relative path -> markdown, for every stage that has output so far."""
    if s.config is None:
        return {}
    head = _header(s)
    files: dict[str, str] = {}
    for analyst in s.config.analysts:
        if analyst in s.reports:
            files[str(ROLES[analyst].report_file)] = (
                f"{head}\n## {ANALYST_TITLES[analyst]}\n\n"
                f"{_marked(s, s.reports[analyst].strip(), role=analyst)}\n")
    for who in DEBATE_ORDER:
        if any(sp.speaker == who for sp in s.debate):
            files[str(ROLES[who].report_file)] = head + "\n" + _speeches(
                SPEAKER_TITLES[who], s.debate, who, s)
    if s.plan is not None:
        files[str(ROLES["research_manager"].report_file)] = f"{head}\n## Research Manager — Investment Plan\n\n{_plan(s)}\n"
    if s.proposal is not None:
        files[str(ROLES["trader"].report_file)] = f"{head}\n## Trader — Proposal\n\n{_proposal(s)}\n"
    for who in RISK_ORDER:
        if any(sp.speaker == who for sp in s.risk):
            files[str(ROLES[who].report_file)] = head + "\n" + _speeches(
                SPEAKER_TITLES[who], s.risk, who, s)
    if s.decision is not None:
        files[str(ROLES["portfolio_manager"].report_file)] = f"{head}\n## Portfolio Manager — Decision\n\n{_decision(s)}\n"
    files["complete_report.md"] = render_complete(s)
    return files


def _plan(s: RunState) -> str:
    return _marked(s, s.plan.render(), role="research_manager") if s.plan else ""


def _proposal(s: RunState) -> str:
    return _marked(s, s.proposal.render(), role="trader") if s.proposal else ""


def _decision(s: RunState) -> str:
    return _marked(s, s.decision.render(), role="portfolio_manager") if s.decision else ""


def render_complete(s: RunState) -> str:
    parts = [_header(s)]
    if s.decision is not None:
        parts.append(f"## Final rating: **{s.decision.rating.value}**\n")
    if s.snapshot is not None:
        parts.append(f"## Verified market snapshot\n\n```\n{s.snapshot.render()}\n```\n")
    parts.append("## I. Analyst team\n")
    for analyst in s.config.analysts:
        text = _marked(s, s.reports[analyst].strip(), role=analyst) \
            if analyst in s.reports else "_No report._"
        parts.append(f"### {ANALYST_TITLES[analyst]}\n\n{text}\n")
    parts.append("## II. Research team\n")
    parts.append(_speeches("Investment debate", s.debate, s=s))
    if s.plan is not None:
        parts.append(f"### Research Manager\n\n{_plan(s)}\n")
    parts.append("## III. Trading team\n")
    parts.append(f"{_proposal(s)}\n" if s.proposal else "_No proposal._\n")
    parts.append("## IV. Risk management team\n")
    parts.append(_speeches("Risk debate", s.risk, s=s))
    parts.append("## V. Portfolio manager\n")
    parts.append(f"{_decision(s)}\n" if s.decision else "_No decision._\n")
    if s.past_context:
        parts.append(f"## Past context given to the portfolio manager\n\n{s.past_context.strip()}\n")
    u = s.usage
    parts.append(f"## Usage\n\nLLM calls {u.llm_calls} · tool calls {u.tool_calls} · tokens in "
                 f"{u.input_tokens:,} / out {u.output_tokens:,} · cost ${u.cost_usd:.4f}\n")
    return "\n".join(parts)
