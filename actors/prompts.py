"""What each role is told. Our own prompts; one builder per role, all fed from the projection.

Every prompt opens with the same context block (ticker, trade date, identity, verified
snapshot) so that every role works from the same exact numbers.
"""
from __future__ import annotations

from events.records import ToolResult
from events.roles import DEBATE_ORDER, RISK_ORDER, ROLES
from projections.grounding import flagged_note
from projections.reports import ANALYST_TITLES, SPEAKER_TITLES
from projections.run_state import RunState, Speech
from providers.fitting import Condensing, first_sentence, first_sentences, trim_rows

#: Nothing cut: the prompt as written.
WHOLE = Condensing()

GROUNDING = (
    "Ground rules: use only numbers that appear in the verified snapshot, in tool results or in "
    "the reports you are given. If a figure you need is missing, say it is missing; never "
    "estimate, recall from memory or invent a number. Dates after the trade date do not exist "
    "for you.")

SYSTEM: dict[str, str] = {
    "market": (
        "You are the market (technical) analyst of a research desk. Study price action and "
        "indicators for the instrument up to the trade date. Pick the few indicators that say "
        "something different from each other (trend, momentum, volatility, volume), fetch them "
        "with the tools, and explain what they show together. Finish with a markdown table of "
        "the key readings and what each implies."),
    "social": (
        "You are the social-sentiment analyst. Read what retail investors and the public said "
        "about the company in the past week (social posts and company news from the tools). "
        "Judge the mood, how strong and how broad it is, and whether it is shifting. Finish "
        "with a line 'Sentiment: <Bullish|Mildly Bullish|Neutral|Mixed|Mildly Bearish|Bearish>, "
        "score <0-10>, confidence <low|medium|high>' and a short markdown table of evidence."),
    "news": (
        "You are the news and macro analyst. Gather company news and the wider market news of "
        "the past week with the tools, and explain what matters for this instrument and why. "
        "Separate facts from speculation. Finish with a markdown table of the items that matter "
        "most and their likely effect."),
    "fundamentals": (
        "You are the fundamentals analyst. Use the tools to read the company's key statistics, "
        "statements (balance sheet, cash flow, income) and insider transactions as known on the "
        "trade date. Assess growth, profitability, balance-sheet strength, valuation and what "
        "insiders did. Finish with a markdown table of the key figures."),
    "bull": (
        "You are the bull researcher in an investment debate. Build the strongest evidence-based "
        "case for owning the instrument: growth, edge, positive signals. Answer the bear's last "
        "point directly and show where it is weak. Speak as in a debate, not as a list."),
    "bear": (
        "You are the bear researcher in an investment debate. Build the strongest evidence-based "
        "case against owning the instrument: risks, weaknesses, negative signals. Answer the "
        "bull's last point directly and show where it is weak. Speak as in a debate."),
    "research_manager": (
        "You are the research manager and judge of the bull/bear debate. Decide which side made "
        "the stronger case on the evidence, and commit to a rating on the five-tier scale "
        "(Buy, Overweight, Hold, Underweight, Sell). Choose Hold only when the evidence is truly "
        "balanced, not as a safe default. Give the rationale and concrete strategic actions."),
    "trader": (
        "You are the trader. Turn the research manager's investment plan into a concrete trade "
        "proposal: action (Buy, Hold or Sell), reasoning, and where sensible an entry price, a "
        "stop loss and position sizing, using the verified snapshot for prices."),
    "aggressive": (
        "You are the aggressive risk analyst. Argue for taking more risk where the reward "
        "justifies it: challenge caution in the trader's proposal and in the other risk "
        "analysts' latest arguments, with evidence from the reports."),
    "conservative": (
        "You are the conservative risk analyst. Protect capital: point out what could go wrong "
        "with the trader's proposal, where it is exposed, and how to reduce risk; answer the "
        "aggressive and neutral analysts' latest arguments with evidence."),
    "neutral": (
        "You are the neutral risk analyst. Weigh the aggressive and conservative views against "
        "each other and the evidence, and propose the balanced adjustment to the trader's plan."),
    "portfolio_manager": (
        "You are the portfolio manager and make the final call. Weigh the investment plan, the "
        "trader's proposal, the risk debate and the lessons from past decisions, then issue one "
        "rating on the five-tier scale (Buy, Overweight, Hold, Underweight, Sell) with an "
        "executive summary, the investment thesis, and where sensible a price target and time "
        "horizon. Hold must be earned by balanced evidence, not used to avoid a decision."),
    "reflector": (
        "You review a past trading decision now that its outcome is known. In two to four "
        "sentences say what the decision got right or wrong and the one lesson to carry into "
        "the next decision on this or similar instruments."),
}

RATING_LINE = ("End with a line of the form 'Rating: <Buy|Overweight|Hold|Underweight|Sell>'.")


def context_block(s: RunState) -> str:
    c = s.config
    lines = [f"Ticker: {c.ticker}", f"Trade date: {c.trade_date}"]
    inst = s.instrument
    if inst is not None and inst.available:
        lines.append("Instrument: " + ", ".join(
            f"{k} {v}" for k, v in (("name", inst.name), ("sector", inst.sector),
                                   ("industry", inst.industry), ("exchange", inst.exchange),
                                   ("currency", inst.currency)) if v))
    else:
        lines.append("Instrument: identity unavailable; work from the ticker only.")
    if s.snapshot is not None:
        lines += ["", s.snapshot.render()]
    else:
        lines += ["", "VERIFIED MARKET SNAPSHOT: unavailable (no price data on or before the trade "
                      "date). Do not quote prices."]
    return "\n".join(lines)


def _cut(text: str, level: Condensing) -> str:
    """A report, plan or proposal: whole, or its first sentences under condensing."""
    text = text.strip()
    return first_sentences(text, level.report_chars) if level.report_chars else text


def _reports(s: RunState, level: Condensing = WHOLE) -> str:
    return "\n\n".join(f"## {ANALYST_TITLES[a]} report\n{_cut(s.reports[a], level)}"
                       for a in s.config.analysts if a in s.reports)


def _history(speeches: tuple[Speech, ...], level: Condensing = WHOLE) -> str:
    """The debate so far; under condensing, turns older than the newest
    ``level.whole_speeches`` become their first sentence."""
    if not speeches:
        return "(no arguments yet)"
    whole_from = (len(speeches) - level.whole_speeches if level.whole_speeches is not None
                  else 0)
    return "\n\n".join(
        f"{SPEAKER_TITLES[sp.speaker]} (round {sp.round}): "
        f"{sp.text.strip() if i >= whole_from else first_sentence(sp.text)}"
        for i, sp in enumerate(speeches))


def _latest(speeches: tuple[Speech, ...], speaker: str) -> str:
    for sp in reversed(speeches):
        if sp.speaker == speaker:
            return sp.text.strip()
    return "(has not spoken yet)"


def _language(s: RunState) -> str:
    lang = s.config.output_language
    if lang.lower() == "english":
        return ""
    return (f"\n\nWrite in {lang}. Keep the rating words (Buy, Overweight, Hold, Underweight, "
            "Sell) and ticker symbols in English.")


def user_message(role: str, s: RunState, level: Condensing = WHOLE) -> str:
    """The first user message of a turn: context + what this role needs to see, condensed
    to ``level`` when the model's context window is small (the context block never is)."""
    ctx = context_block(s)
    stage = ROLES[role].stage if role in ROLES else None
    if stage == "analyst":
        task = f"Write the {ANALYST_TITLES[role].lower()} report for {s.config.ticker}."
        body = f"{ctx}\n\n{GROUNDING}\n\n{task}"
    elif stage == "debate":
        other = next(r for r in DEBATE_ORDER if r != role)
        body = (f"{ctx}\n\n{_reports(s, level)}\n\n## Debate so far\n"
                f"{_history(s.debate, level)}\n\n"
                f"## The {other}'s last argument\n{_cut(_latest(s.debate, other), level)}\n\n"
                f"{GROUNDING}\n\n"
                f"Make your next argument as the {role}.")
    elif role == "research_manager":
        body = (f"{ctx}\n\n## Debate\n{_history(s.debate, level)}\n\n{GROUNDING}\n\n"
                f"Judge the debate and issue the investment plan. {RATING_LINE}")
    elif role == "trader":
        body = (f"{ctx}\n\n## Investment plan\n{_cut(s.plan.render(), level)}\n\n{GROUNDING}\n\n"
                "Propose the trade. End with 'FINAL TRANSACTION PROPOSAL: **BUY|HOLD|SELL**'.")
    elif stage == "risk":
        others = [r for r in RISK_ORDER if r != role]
        latest = "\n\n".join(f"## Latest from the {o} analyst\n{_cut(_latest(s.risk, o), level)}"
                               for o in others)
        body = (f"{ctx}\n\n## Trader's proposal\n{_cut(s.proposal.render(), level)}\n\n"
                f"{_reports(s, level)}\n\n## Risk debate so far\n{_history(s.risk, level)}"
                f"\n\n{latest}\n\n{GROUNDING}\n\n"
                f"Make your next argument as the {role} risk analyst.")
    elif role == "portfolio_manager":
        past = s.past_context or "(no resolved past decisions are available)"
        body = (f"{ctx}\n\n## Investment plan\n{_cut(s.plan.render(), level)}\n\n"
                f"## Trader's proposal\n{_cut(s.proposal.render(), level)}\n\n"
                f"## Risk debate\n{_history(s.risk, level)}\n\n"
                f"## Lessons from past decisions\n{past}\n\n{GROUNDING}\n\n"
                f"Issue the final decision. {RATING_LINE}")
    else:
        raise ValueError(f"no prompt for role {role!r}")
    note = flagged_note(s, role)  # the deciders hear which figures they got are unverified
    return body + (f"\n\n{note}" if note else "") + _language(s)


def reflection_message(ticker: str, trade_date: str, decision: str, raw: float, alpha: float,
                       benchmark: str, days: int, *, rating: str, thesis: str) -> str:
    """The reflector's prompt: it names the rating and the thesis first, so the lesson judges
    the call that was made (the decision text alone left the offline reflector guessing)."""
    return (f"Ticker: {ticker}\nTrade date: {trade_date}\nRating: {rating}\n"
            f"Thesis: {thesis or '(none recorded)'}\n\n## The decision\n{decision}\n\n"
            f"## Outcome over {days} trading days\nRaw return: {raw:+.2%}\n"
            f"Benchmark {benchmark} return: {raw - alpha:+.2%}\nAlpha: {alpha:+.2%}\n\n"
            f"Reflect on the {rating} call and its thesis.")


#: Asked once, after the report, when a structured-report role's report has no labelled
#: line to read the structure from (events/sentiment.py parses it first).
STRUCTURE_REPORT = ("Hand in your report in the requested structure: the overall sentiment "
                    "band, a score from 0 (most bearish) to 10 (most bullish), your confidence "
                    "(low, medium or high), and as the narrative your whole report above, "
                    "unchanged. Add no new facts.")

CAP_REACHED = ("You have used all the tool calls allowed for this report. Write the report now "
               "with what you have; say which data you could not fetch.")


NO_TOOLS_TASK = ("The data below was fetched for you with the desk's tools (this model does not "
                 "call tools itself). Write the report from it.")


def tool_results_block(results: list[tuple[str, dict, ToolResult]],
                       level: Condensing = WHOLE) -> str:
    """The results of the tools a role called for a model that cannot call them, as one
    section of the user message (each trimmed to the level's newest rows)."""
    parts = []
    for name, arguments, result in results:
        text = result.text.strip()
        if level.tool_rows is not None:
            text = trim_rows(text, level.tool_rows)
        args = ", ".join(f"{k}={v}" for k, v in arguments.items())
        parts.append(f"### {name}({args})\n{text}")
    return f"{NO_TOOLS_TASK}\n\n## Tool results\n" + "\n\n".join(parts)
