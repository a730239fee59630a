"""The team, as one table: every fact about a role lives in its ``RoleSpec``.

Schedules, prompts, reports, the offline model and the actors all derive what they need
from ``ROLES`` (speaking orders, deep-tier roles, output events, tools, report files), so
adding or changing a role is one row here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Stage = Literal["analyst", "debate", "research", "trading", "risk", "portfolio", "memory"]
Tier = Literal["quick", "deep"]


@dataclass(frozen=True, slots=True)
class RoleSpec:
    name: str
    stage: Stage
    title: str  # how reports and prompts name the role
    tier: Tier = "quick"
    output: str | None = None  # the event type a turn of this role answers with
    schema: str | None = None  # structured-output schema (decisions, the sentiment report)
    tools: tuple[str, ...] = ()  # tools an analyst may call
    report_file: str | None = None  # path of its report, relative to the run's folder


ROLES: dict[str, RoleSpec] = {r.name: r for r in (
    RoleSpec("market", "analyst", "Market Analyst", output="AnalystReportSubmitted",
             tools=("get_stock_data", "get_indicators", "get_verified_market_snapshot"),
             report_file="1_analysts/market.md"),
    RoleSpec("social", "analyst", "Social Sentiment Analyst", output="AnalystReportSubmitted",
             schema="SentimentReport", tools=("get_social_posts", "get_news"),
             report_file="1_analysts/sentiment.md"),
    RoleSpec("news", "analyst", "News Analyst", output="AnalystReportSubmitted",
             tools=("get_news", "get_global_news", "get_insider_transactions",
                    "get_macro_indicators", "get_prediction_markets"),
             report_file="1_analysts/news.md"),
    RoleSpec("fundamentals", "analyst", "Fundamentals Analyst", output="AnalystReportSubmitted",
             tools=("get_fundamentals", "get_balance_sheet", "get_cashflow",
                    "get_income_statement", "get_insider_transactions"),
             report_file="1_analysts/fundamentals.md"),
    RoleSpec("bull", "debate", "Bull Researcher", output="DebateArgumentMade",
             report_file="2_research/bull.md"),
    RoleSpec("bear", "debate", "Bear Researcher", output="DebateArgumentMade",
             report_file="2_research/bear.md"),
    RoleSpec("research_manager", "research", "Research Manager", tier="deep",
             output="InvestmentPlanIssued", schema="ResearchPlan",
             report_file="2_research/manager.md"),
    RoleSpec("trader", "trading", "Trader", output="TradeProposed", schema="TradeProposal",
             report_file="3_trading/trader.md"),
    RoleSpec("aggressive", "risk", "Aggressive Risk Analyst", output="RiskArgumentMade",
             report_file="4_risk/aggressive.md"),
    RoleSpec("conservative", "risk", "Conservative Risk Analyst", output="RiskArgumentMade",
             report_file="4_risk/conservative.md"),
    RoleSpec("neutral", "risk", "Neutral Risk Analyst", output="RiskArgumentMade",
             report_file="4_risk/neutral.md"),
    RoleSpec("portfolio_manager", "portfolio", "Portfolio Manager", tier="deep",
             output="PortfolioDecisionIssued", schema="PortfolioDecision",
             report_file="5_portfolio/decision.md"),
    RoleSpec("reflector", "memory", "Reflector"),
)}


def in_stage(stage: Stage) -> tuple[str, ...]:
    """Role names of a stage, in table order (which is their speaking order)."""
    return tuple(name for name, spec in ROLES.items() if spec.stage == stage)


ANALYSTS = in_stage("analyst")
DEBATE_ORDER = in_stage("debate")
RISK_ORDER = in_stage("risk")
DEEP_ROLES = frozenset(name for name, spec in ROLES.items() if spec.tier == "deep")
#: Roles that answer turns, and the event type each answers with.
OUTPUT_OF_ROLE: dict[str, str] = {n: s.output for n, s in ROLES.items() if s.output}
#: Roles whose turn ends in a structured output (a decision, the sentiment report), and its
#: schema.
SCHEMA_OF_ROLE: dict[str, str] = {n: s.schema for n, s in ROLES.items() if s.schema}
#: Of those, the roles whose whole turn is one decision (no tools, no report).
DECISION_OF_ROLE: dict[str, str] = {n: s for n, s in SCHEMA_OF_ROLE.items()
                                    if ROLES[n].stage != "analyst"}
#: Tools each analyst may call.
TOOLS_OF_ROLE: dict[str, tuple[str, ...]] = {n: s.tools for n, s in ROLES.items() if s.tools}
#: The deciding role of each decision event type.
ROLE_OF_DECISION: dict[str, str] = {str(ROLES[n].output): n for n in DECISION_OF_ROLE}


def speaker_of(output: object) -> str:
    """The role that produced a turn output event."""
    named = getattr(output, "analyst", None) or getattr(output, "speaker", None)
    if named:
        return str(named)
    return ROLE_OF_DECISION.get(getattr(output, "type", ""), "unknown")
