"""Whole runs with real LLM plumbing: every role speaks through the LLM gateway actor and
litellm, over real HTTP, to a fake OpenAI-compatible server (the far side of the network is
the only thing faked). Also: failure paths (429, bad structured output, 401), budgets with
resume, the key check before a run, and the output language."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer, error, json_reply, text, tool_calls

from actors import prompts
from events.duckdb_store import DuckDBEventStore
from events.rating import Rating
from events.roles import ROLES

MODEL = "openai/test-model"
DEEP_MODEL = "openai/test-deep-model"
DATE = "2024-05-10"
RATINGS = {r.value for r in Rating}
DECIDERS = {"research_manager": "ResearchPlan", "trader": "TradeProposal",
            "portfolio_manager": "PortfolioDecision"}


class RoutedServer(FakeOpenAIServer):
    """The fake server, plus replies routed by what a request is (which role asks, for which
    schema), since the roles of a run call concurrently and a FIFO script cannot aim."""

    def __init__(self) -> None:
        super().__init__()
        self.routes: list[list] = []  # [predicate, replies left (None: forever), reply]

    def route(self, predicate, *replies: dict, forever: dict | None = None) -> RoutedServer:
        with self._lock:
            if forever is not None:
                self.routes.append([predicate, None, forever])
            else:
                self.routes.append([predicate, list(replies), None])
        return self

    def _choose(self, body: dict) -> dict:
        for predicate, left, always in self.routes:
            if predicate(body) and (left is None or left):
                return always if left is None else left.pop(0)
        return super()._choose(body)


@pytest.fixture
def server():
    with RoutedServer() as s:
        yield s


def role_of(body: dict) -> str | None:
    """Which role sent a request, from the system prompt (it starts with the role's prompt)."""
    system = str((body.get("messages") or [{}])[0].get("content") or "")
    return next((r for r, p in prompts.SYSTEM.items() if system.startswith(p)), None)


def is_role(role: str):
    return lambda body: role_of(body) == role


def tool_turns(body: dict) -> int:
    return sum(m.get("role") == "tool" for m in body.get("messages", []))


def read(store_path: Path, run_id: str):
    with DuckDBEventStore(store_path, read_only=True) as store:
        return store.read_stream(run_id), store.verify(run_id)


def payloads(events, type_: str) -> list:
    return [e.payload for e in events if e.type == type_]


def run_http(cli, server, store_path, ohlcv_dir, *extra: str):
    result = cli("run", "NVDA", "--date", DATE, "--data-dir", ohlcv_dir, "--quick-model", MODEL,
                 "--deep-model", MODEL, "--base-url", server.url, "--store", store_path,
                 "--json", *extra)
    rows = json.loads(result.stdout) if result.stdout.strip().startswith("[") else None
    return result, rows


def one_line_stderr(result) -> str:
    return " ".join(result.stderr.split())


# ---- 1. a whole run over HTTP ---------------------------------------------------------------
def test_full_run_every_role_over_http(cli, server, ohlcv_dir, store_path, monkeypatch):
    # an OpenAI-compatible endpoint given by base URL needs no OPENAI_API_KEY
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("TA_ACTORS_BASE_URL", raising=False)
    # the market analyst fetches over three model turns: prices, then an indicator, then writes
    server.route(lambda b: role_of(b) == "market" and tool_turns(b) == 0,
                 tool_calls(("get_stock_data", {"symbol": "NVDA", "start_date": "2024-04-01",
                                                "end_date": DATE})))
    server.route(lambda b: role_of(b) == "market" and tool_turns(b) == 1,
                 tool_calls(("get_indicators", {"symbol": "NVDA", "indicator": "rsi",
                                                "curr_date": DATE, "look_back_days": 30})))
    result, rows = run_http(cli, server, store_path, ohlcv_dir, "--deep-model", DEEP_MODEL)
    assert result.exit_code == 0, result.output
    (row,) = rows
    assert row["status"] == "completed" and row["rating"] in RATINGS
    events, verification = read(store_path, row["run_id"])
    assert verification.ok
    assert events[-1].type == "RunCompleted"
    calls = payloads(events, "LLMCallCompleted")
    # one HTTP request per recorded call: nothing hidden, nothing repeated
    assert len(server.requests) == len(calls) == row["llm_calls"]
    assert all(p == "/v1/chat/completions" for p in server.paths)
    assert {c.model for c in calls} == {MODEL, DEEP_MODEL}
    assert {c.provider for c in calls} == {"openai"}
    assert all(len(c.attempts) == 1 and c.attempts[0].status == 200 for c in calls)
    assert all(c.input_tokens > 0 and c.output_tokens > 0 for c in calls)
    assert len({(c.turn_id, c.call_index) for c in calls}) == len(calls)
    # the three deciders got schema-valid decisions through json_schema structured output
    for role, schema in DECIDERS.items():
        (call,) = [c for c in calls if c.role == role]
        assert call.output_mode == "structured" and call.structured
        assert call.tier == ROLES[role].tier
        sent = next(b for b in server.requests if role_of(b) == role)
        assert sent["response_format"]["json_schema"]["name"] == schema
    assert {c.tier for c in calls if c.role in ("research_manager", "portfolio_manager")} == {
        "deep"}
    decision = payloads(events, "PortfolioDecisionIssued")[0]
    assert decision.output_mode == "structured" and decision.decision.rating.value == row["rating"]
    # every call went to its tier's model: in the record and over the wire
    for c in calls:
        assert c.tier == ROLES[c.role].tier, c.role
        assert c.model == (DEEP_MODEL if c.tier == "deep" else MODEL), c.role
    assert Counter(body["model"] for body in server.requests) == Counter(
        c.model.removeprefix("openai/") for c in calls)
    # the messages each event records are the messages that went over the wire
    def key(messages: list) -> tuple:
        return tuple((m["role"], m.get("content") or "", m.get("tool_call_id")) for m in messages)
    sent_keys = Counter()
    for body in server.requests:
        first, *rest = body["messages"]
        sent_keys[(first["content"].split("\n\nWrite your whole answer in")[0],) + key(rest)] += 1
    recorded = Counter()
    for c in calls:
        first, *rest = [m.model_dump() for m in c.messages]
        recorded[(first["content"],) + key(rest)] += 1
    assert recorded == sent_keys
    # analysts used real tools over several turns; tool results went back to the model
    market = sorted((c for c in calls if c.role == "market"), key=lambda c: c.call_index)
    assert [len(c.tool_calls) for c in market] == [1, 1, 0]
    assert [c.tool_calls[0].name for c in market[:2]] == ["get_stock_data", "get_indicators"]
    tools = payloads(events, "ToolCallCompleted")
    market_tools = [t for t in tools if t.role == "market"]
    assert [t.tool for t in market_tools] == ["get_stock_data", "get_indicators"]
    assert all(t.result.status == "ok" for t in market_tools), [t.result for t in market_tools]
    tool_msgs = [m for m in market[2].messages if m.role == "tool"]
    assert [m.content for m in tool_msgs] == [t.result.text for t in market_tools]
    assert {t.role for t in tools} == {"market", "social", "news", "fundamentals"}
    for analyst in ("news", "fundamentals"):
        turns = [c for c in calls if c.role == analyst]
        assert len(turns) == 2 and turns[0].tool_calls and not turns[1].tool_calls
    # the social report had no "Sentiment:" line, so its structure was asked for once more,
    # with the SentimentReport schema as native structured output; the narrative is the report
    social = sorted((c for c in calls if c.role == "social"), key=lambda c: c.call_index)
    assert len(social) == 3 and social[0].tool_calls and not social[1].tool_calls
    assert social[2].output_mode == "structured" and social[2].structured["band"] == "Bullish"
    asked = [b for b in server.requests if role_of(b) == "social" and b.get("response_format")]
    assert [b["response_format"]["json_schema"]["name"] for b in asked] == ["SentimentReport"]
    sentiment = next(p for p in payloads(events, "AnalystReportSubmitted")
                     if p.analyst == "social")
    assert sentiment.output_mode == "structured"
    assert sentiment.sentiment.narrative == social[1].response_text.strip()
    assert sentiment.report.startswith("**Overall sentiment**: Bullish (score 1.5 of 10, low")
    # the analyst reports are the model's final text
    reports = {p.analyst: p.report for p in payloads(events, "AnalystReportSubmitted")}
    assert reports["market"] == market[2].response_text.strip()


# ---- 2. failure paths inside a run --------------------------------------------------------
def test_rate_limit_retried_and_bad_structured_output_falls_back(cli, server, ohlcv_dir,
                                                                 store_path):
    server.route(is_role("trader"), error(429, "Rate limit reached for test-model"))
    pm_text = ("The evidence is mixed but valuation is stretched after the rally.\n"
               "Executive Summary: trim the position.\nRating: Underweight")
    server.route(is_role("portfolio_manager"), text("{\"rating\": \"Strong buy!!\", " + pm_text))
    result, rows = run_http(cli, server, store_path, ohlcv_dir)
    assert result.exit_code == 0, result.output
    (row,) = rows
    assert row["status"] == "completed" and row["rating"] == "Underweight"
    events, _ = read(store_path, row["run_id"])
    calls = payloads(events, "LLMCallCompleted")
    assert len(server.requests) == len(calls) + 1  # the one 429, retried once
    (trader,) = [c for c in calls if c.role == "trader"]
    assert [a.status for a in trader.attempts] == [429, 200]
    assert "rate limited (HTTP 429)" in trader.attempts[0].error
    assert trader.attempts[1].waited_s > 0 and trader.output_mode == "structured"
    assert all(len(c.attempts) == 1 for c in calls if c.role != "trader")
    (pm,) = [c for c in calls if c.role == "portfolio_manager"]
    assert pm.output_mode == "freetext" and pm.structured["rating"] == "Underweight"
    assert pm.response_text.endswith("Rating: Underweight")
    (decision,) = payloads(events, "PortfolioDecisionIssued")
    assert decision.output_mode == "freetext" and decision.decision.rating.value == "Underweight"
    replay = cli("replay", row["run_id"], "--store", store_path, "--json")
    assert replay.exit_code == 0, replay.output
    audit = json.loads(replay.stdout)
    assert audit["decision_matches"] is True and audit["rederived_rating"] == "Underweight"


def test_auth_failure_fails_the_run_with_one_line(cli, server, ohlcv_dir, store_path):
    server.route(lambda body: True, forever=error(401, "Incorrect API key provided: sk-bad"))
    result, rows = run_http(cli, server, store_path, ohlcv_dir)
    assert result.exit_code == 1
    (row,) = rows
    assert row["status"] == "failed" and row["rating"] is None
    reason = row["reason"]
    assert "\n" not in reason and "rejected the credentials" in reason and "401" in reason
    events, verification = read(store_path, row["run_id"])
    assert verification.ok
    (failed,) = payloads(events, "RunFailed")
    assert failed.kind == "llm" and failed.reason == reason
    assert failed.role in ("market", "social", "news", "fundamentals")
    llm_failed = payloads(events, "LLMCallFailed")
    assert llm_failed and any(f.role == failed.role for f in llm_failed)
    for f in llm_failed:  # 401 is not retried
        assert [a.status for a in f.attempts] == [401] and "OPENAI_API_KEY" in f.error
    assert not payloads(events, "LLMCallCompleted")
    assert len(server.requests) <= 4  # at most one per analyst, no retries
    assert Counter(role_of(b) for b in server.requests).most_common(1)[0][1] == 1


# ---- 3. a token budget stops a run; resume with a larger one finishes it --------------------
def gateway_calls() -> int:
    """Model calls the session's LLM gateway actor has answered (offline models)."""
    import ray

    from actors.runtime import NAMESPACE
    try:
        gateway = ray.get_actor("llm-gateway", namespace=NAMESPACE)
    except ValueError:  # not created yet in this session: it has answered nothing
        return 0
    usage = ray.get(gateway.usage.remote())
    return sum(row["calls"] for model, row in usage.items() if model.startswith("offline/"))


def test_budget_stop_then_resume_repeats_no_call(cli, ohlcv_dir, store_path):
    before = gateway_calls()
    # a whole offline run spends ~34k tokens; the analysts ~9k, so 14k stops in the debate
    result = cli("run", "NVDA", "--date", DATE, "--offline", "--data-dir", ohlcv_dir,
                 "--token-budget", "14000", "--store", store_path, "--json")
    assert result.exit_code == 1, result.output
    (row,) = json.loads(result.stdout)
    assert row["status"] == "failed" and "token budget 14,000 reached" in row["reason"]
    run_id = row["run_id"]
    stopped, _ = read(store_path, run_id)
    assert stopped[-1].type == "RunFailed" and stopped[-1].payload.kind == "budget"
    first_calls = {(c.turn_id, c.call_index): c for c in payloads(stopped, "LLMCallCompleted")}
    assert len(payloads(stopped, "AnalystReportSubmitted")) == 4
    assert not payloads(stopped, "PortfolioDecisionIssued")
    assert sum(c.input_tokens + c.output_tokens for c in first_calls.values()) >= 14000
    made_before_stop = gateway_calls() - before
    assert made_before_stop == len(first_calls)

    resumed = cli("resume", run_id, "--token-budget", "1000000", "--store", store_path, "--json")
    assert resumed.exit_code == 0, resumed.output
    (row2,) = json.loads(resumed.stdout)
    assert row2["status"] == "completed" and row2["rating"] in RATINGS
    events, verification = read(store_path, run_id)
    assert verification.ok and events[: len(stopped)] == stopped  # the record only grew
    types = [e.type for e in events[len(stopped):]]
    assert types[:2] == ["RunDriven", "RunResumed"] and types[-3:] == [
        "PortfolioDecisionIssued", "GroundingChecked", "RunCompleted"]
    calls = payloads(events, "LLMCallCompleted")
    keys = [(c.turn_id, c.call_index) for c in calls]
    assert len(keys) == len(set(keys))  # each model call recorded once
    assert not set(first_calls) & {(c.turn_id, c.call_index)
                                   for c in payloads(events[len(stopped):], "LLMCallCompleted")}
    # and made once: the gateway answered exactly one call per recorded event
    assert gateway_calls() - before == len(calls) == row2["llm_calls"]
    assert events[-3].payload.decision.rating.value == row2["rating"]
    (failure,) = payloads(events, "RunFailed")  # the stop, before any analyst-free turn ran
    assert failure.role not in ("market", "social", "news", "fundamentals", "portfolio_manager")


# ---- 4. keys are checked before anything starts; unknown models only warn -------------------
def test_missing_key_stops_before_the_store_exists(cli, monkeypatch, store_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("TA_ACTORS_BASE_URL", raising=False)
    result = cli("run", "NVDA", "--date", DATE, "--quick-model", "openai/gpt-4.1-mini",
                 "--deep-model", "anthropic/claude-sonnet-4-5", "--store", store_path)
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and message.startswith("error:")
    assert "OPENAI_API_KEY" in message and "openai/gpt-4.1-mini" in message
    assert result.stdout == ""
    assert not store_path.exists()
    # with the OpenAI key set, the next missing one is named
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-0123456789abcdef")
    result = cli("run", "NVDA", "--date", DATE, "--quick-model", "openai/gpt-4.1-mini",
                 "--deep-model", "anthropic/claude-sonnet-4-5", "--store", store_path)
    assert result.exit_code == 2 and "ANTHROPIC_API_KEY" in result.stderr
    assert not store_path.exists()


def test_unknown_model_of_known_provider_warns_and_runs(cli, server, monkeypatch, ohlcv_dir,
                                                        store_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy-0123456789")
    result = cli("run", "NVDA", "--date", DATE, "--data-dir", ohlcv_dir, "--quick-model",
                 "anthropic/claude-nonexistent-9", "--deep-model", "anthropic/claude-sonnet-4-5",
                 "--base-url", server.url, "--store", store_path, "--json")
    warning = one_line_stderr(result)
    assert "warning:" in warning
    assert "model 'claude-nonexistent-9' is not in the catalog for anthropic" in warning
    assert "continuing anyway" in warning
    # the run went ahead (the store has it) and failed fast on the model, as a recorded fact
    assert result.exit_code == 1
    (row,) = json.loads(result.stdout)
    events, _ = read(store_path, row["run_id"])
    assert events[0].payload.config.quick_model == "anthropic/claude-nonexistent-9"
    (failed,) = payloads(events, "RunFailed")
    assert failed.kind == "llm" and "anthropic/claude-nonexistent-9" in failed.reason
    assert payloads(events, "LLMCallFailed")


# ---- 5. output language ---------------------------------------------------------------------
def test_output_language_reaches_every_request_and_ratings_stay_english(cli, server, ohlcv_dir,
                                                                        store_path):
    server.route(is_role("research_manager"), text(
        "Los alcistas tienen mejores argumentos: el crecimiento de los centros de datos sigue "
        "fuerte.\nRecomendación: comprar con moderación.\nRating: Overweight"))
    server.route(is_role("portfolio_manager"), json_reply({
        "rating": "Underweight", "executive_summary": "Reducir la posición: la valoración es "
        "exigente tras la subida.", "investment_thesis": "El riesgo de corrección supera al "
        "potencial a corto plazo.", "price_target": None, "time_horizon": "3 meses"}))
    result, rows = run_http(cli, server, store_path, ohlcv_dir, "--language", "Spanish")
    assert result.exit_code == 0, result.output
    (row,) = rows
    assert row["rating"] == "Underweight"
    events, _ = read(store_path, row["run_id"])
    assert events[0].payload.config.output_language == "Spanish"
    calls = payloads(events, "LLMCallCompleted")
    assert len(server.requests) == len(calls)
    for body in server.requests:  # the instruction is in the system message of every request
        system = body["messages"][0]
        assert system["role"] == "system"
        assert "Write your whole answer in Spanish" in system["content"]
        assert "Keep the rating words Buy, Overweight, Hold, Underweight, Sell" in (
            system["content"])
        assert sum(m["role"] == "system" for m in body["messages"]) == 1
        assert "Write in Spanish" in body["messages"][1]["content"]  # and in the task itself
    (plan,) = payloads(events, "InvestmentPlanIssued")
    assert plan.output_mode == "freetext" and plan.plan.recommendation.value == "Overweight"
    assert "centros de datos" in plan.plan.rationale
    (decision,) = payloads(events, "PortfolioDecisionIssued")
    assert decision.output_mode == "structured"
    assert decision.decision.rating.value == "Underweight"
    assert decision.decision.executive_summary.startswith("Reducir la posición")
    (completed,) = payloads(events, "RunCompleted")
    assert completed.rating.value == "Underweight"
    report = Path(row["reports"]).read_text(encoding="utf-8")
    assert "Reducir la posición" in report and "Underweight" in report


# ---- 6. a confused model: unknown tools, bad arguments, a tool loop that never ends ----------
def test_confused_model_gets_errors_back_and_is_capped(cli, server, ohlcv_dir, store_path,
                                                         monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # the market analyst asks for a tool that does not exist and for one with a bad argument,
    # then keeps asking for more tools forever; the cap (3) ends it
    server.route(lambda b: role_of(b) == "market" and tool_turns(b) == 0,
                 tool_calls(("get_weather", {"city": "Santa Clara"}),
                            ("get_indicators", {"symbol": "NVDA", "indicator": "astrology",
                                                "curr_date": DATE})))
    server.route(lambda b: role_of(b) == "market" and b.get("tools"),
                 forever=tool_calls(("get_stock_data", {"symbol": "NVDA",
                                                        "start_date": "2024-04-01",
                                                        "end_date": "2031-01-01"})))
    result, rows = run_http(cli, server, store_path, ohlcv_dir, "--analysts", "market",
                            "--max-tool-calls", "3")
    assert result.exit_code == 0, result.output
    events, _ = read(store_path, rows[0]["run_id"])
    tools = [t for t in payloads(events, "ToolCallCompleted") if t.role == "market"]
    assert len(tools) == 3  # the cap
    unknown, bad = tools[0], tools[1]
    assert unknown.tool == "get_weather" and unknown.result.status == "error"
    assert "unknown tool 'get_weather'" in unknown.result.text
    assert bad.result.status == "error" and "astrology" in bad.result.text
    assert "rsi" in bad.result.text  # the valid names are listed for the model
    # dates after the trade date never reach the model: the future end date was clamped
    prices = tools[2].result.text
    assert "clamped to trade date 2024-05-10" in prices and "2024-05-10" in prices
    assert "2024-05-13" not in prices  # the next trading day's bar is not shown
    (cap,) = payloads(events, "ToolCapReached")
    assert cap.cap == 3 and cap.role == "market"
    # after the cap the analyst was asked to write its report, without tools
    final = [b for b in server.requests if role_of(b) == "market"][-1]
    assert not final.get("tools") and prompts.CAP_REACHED in json.dumps(final["messages"])
    assert payloads(events, "AnalystReportSubmitted")[0].analyst == "market"
    assert events[-1].type == "RunCompleted"
