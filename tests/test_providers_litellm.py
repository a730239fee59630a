"""The litellm path at its network boundary: litellm talks real HTTP to a fake
OpenAI-compatible server that plays scripted replies (see fake_openai_server.py)."""
from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
from fake_openai_server import error, fake_openai, hang, json_reply, text, tool_calls  # noqa: F401

from events.records import Message, ToolSpec
from providers import litellm_client
from providers.base import LLMError, LLMRequest
from providers.capabilities import Capabilities
from providers.credentials import MissingKeyError
from providers.gateway import LLMGateway

KEY = "sk-test-dummy-0123456789abcdef"
MODEL = "openai/test-model"
USER = Message(role="user", content="Ticker: NVDA\nTrade date: 2024-05-10\nWrite the report.")
SYSTEM = Message(role="system", content="You are the market analyst.")
TOOL = ToolSpec(name="get_indicators", description="one indicator", parameters={
    "type": "object", "required": ["symbol", "indicator", "curr_date"], "properties": {
        "symbol": {"type": "string"}, "indicator": {"type": "string"},
        "curr_date": {"type": "string"}}})


@pytest.fixture(scope="module", autouse=True)
def _warm():
    LLMGateway().warm_up()  # import litellm once, outside any timed call


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def run(request: LLMRequest, gateway: LLMGateway | None = None):
    return asyncio.run((gateway or LLMGateway(retry_base_s=0.01)).complete(request))


def req(server, **kw) -> LLMRequest:
    base = {"model": MODEL, "base_url": server.url, "messages": [SYSTEM, USER], "role": "market"}
    return LLMRequest(**{**base, **kw})


def test_plain_text_over_http(fake_openai, key):
    fake_openai.push(text("NVDA closed at 100.00."))
    reply = run(req(fake_openai, temperature=0.2, output_language="Deutsch"))
    assert reply.text == "NVDA closed at 100.00." and reply.output_mode == "freetext"
    assert reply.structured is None and reply.tool_calls == []
    assert reply.input_tokens > 0 and reply.output_tokens > 0 and reply.cost_usd == 0.0
    assert [a.status for a in reply.attempts] == [200] and reply.provider == "openai"
    sent = fake_openai.requests[0]
    assert fake_openai.paths == ["/v1/chat/completions"]
    assert sent["model"] == "test-model" and sent["temperature"] == 0.2
    system = sent["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are the market")
    assert "Write your whole answer in Deutsch" in system["content"]
    assert sum(m["role"] == "system" for m in sent["messages"]) == 1
    assert fake_openai.headers[0]["authorization"] == f"Bearer {KEY}"


def test_local_endpoint_needs_no_key(fake_openai, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    reply = run(req(fake_openai))
    assert reply.text and fake_openai.headers[0]["authorization"] == "Bearer no-key-needed"


def test_hosted_model_without_key_fails_before_any_request(fake_openai, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        run(LLMRequest(model="openai/gpt-4.1-mini", messages=[USER], role="market"))
    assert fake_openai.requests == []


def test_tool_calls_over_several_turns(fake_openai, key):
    fake_openai.push(tool_calls(("get_indicators", {"symbol": "NVDA", "indicator": "rsi",
                                                    "curr_date": "2024-05-10"})),
                     text("RSI is 63.4567."))
    first = run(req(fake_openai, tools=[TOOL]))
    assert [(c.name, c.arguments["indicator"]) for c in first.tool_calls] == [
        ("get_indicators", "rsi")]
    assert fake_openai.requests[0]["tools"][0]["function"]["name"] == "get_indicators"
    assert "tool_choice" not in fake_openai.requests[0]  # analysts choose freely
    call = first.tool_calls[0]
    messages = [SYSTEM, USER, Message(role="assistant", tool_calls=first.tool_calls),
                Message(role="tool", tool_call_id=call.id, name=call.name,
                        content="2024-05-10: 63.4567")]
    second = run(req(fake_openai, tools=[TOOL], messages=messages))
    assert second.text == "RSI is 63.4567." and second.tool_calls == []
    sent = fake_openai.requests[1]["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"])["indicator"] == "rsi"
    tool = next(m for m in sent if m["role"] == "tool")
    assert tool["tool_call_id"] == call.id and tool["content"] == "2024-05-10: 63.4567"


VALID = {"rating": "Overweight", "executive_summary": "Trend intact.",
         "investment_thesis": "Close above both averages.", "price_target": 110.5,
         "time_horizon": "1 week"}


def test_valid_json_schema_reply_is_structured(fake_openai, key):
    fake_openai.push(json_reply(VALID))
    reply = run(req(fake_openai, role="portfolio_manager", output_schema="PortfolioDecision"))
    assert reply.output_mode == "structured" and reply.structured == VALID
    assert "**Rating**: Overweight" in reply.text
    fmt = fake_openai.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "PortfolioDecision"
    assert fmt["json_schema"]["strict"] is True


@pytest.mark.parametrize("body", [
    json.dumps({"rating": "Strong Buy", "executive_summary": "x"}),  # wrong tier word
    "I lean cautious here.\nRating: Underweight\nThe trend is fading.",  # ignored the format
])
def test_invalid_structured_reply_falls_back_to_freetext(fake_openai, key, body):
    fake_openai.push(text(body))
    reply = run(req(fake_openai, role="portfolio_manager", output_schema="PortfolioDecision"))
    assert reply.output_mode == "freetext"
    assert reply.structured["rating"] == ("Buy" if "Strong" in body else "Underweight")
    assert reply.structured["investment_thesis"] == body
    assert len(fake_openai.requests) == 1  # no extra model call to extract the rating


def test_structured_through_a_forced_tool(fake_openai, monkeypatch):
    """A row without json_schema (deepseek-chat): the schema is bound as a forced tool."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    fake_openai.push(tool_calls(("submit_TradeProposal", {
        "action": "Buy", "reasoning": "Trend.", "entry_price": 100.0, "stop_loss": 95.0,
        "position_sizing": None})))
    reply = run(req(fake_openai, model="deepseek/deepseek-chat", role="trader",
                    output_schema="TradeProposal"))
    assert reply.output_mode == "tool" and reply.structured["stop_loss"] == 95.0
    assert reply.tool_calls == []  # the submission is not a tool for the actor to run
    sent = fake_openai.requests[0]
    assert "response_format" not in sent
    assert sent["tool_choice"]["function"]["name"] == "submit_TradeProposal"


def test_model_without_structure_support_gets_prose_and_a_parsed_decision(fake_openai, key):
    caps = Capabilities(tools=False, json_schema=False, tool_choice=False, source="test-row")
    fake_openai.push(text("Recommendation: Sell\nRationale: momentum broke.\n"
                          "Strategic Actions: exit over two days."))
    request = req(fake_openai, role="research_manager", output_schema="ResearchPlan",
                  tools=[TOOL])
    raw = asyncio.run(litellm_client.call(request, caps))
    assert raw.output_mode == "freetext" and raw.structured == {
        "recommendation": "Sell", "rationale": "momentum broke.",
        "strategic_actions": "exit over two days."}
    sent = fake_openai.requests[0]
    assert "tools" not in sent and "response_format" not in sent
    assert "'Strategic Actions:'" in sent["messages"][0]["content"]


@pytest.mark.parametrize("status,kind", [(429, "rate_limit"), (500, "server"),
                                         (503, "server")])
def test_transient_failure_then_success_is_retried(fake_openai, key, status, kind):
    fake_openai.push(error(status), text("recovered"))
    reply = run(req(fake_openai))
    assert reply.text == "recovered" and len(fake_openai.requests) == 2  # no hidden retries
    failed, ok = reply.attempts
    assert failed.status == status and failed.error.startswith(f"{kind}: ")
    assert ok.status == 200 and ok.error is None and ok.waited_s > 0


def test_retries_are_bounded_and_every_attempt_kept(fake_openai, key):
    fake_openai.push(error(429), error(429), error(429), text("too late"))
    gateway = LLMGateway(retry_base_s=0.01)
    with pytest.raises(LLMError) as info:
        run(req(fake_openai, max_retries=2), gateway)
    assert info.value.kind == "rate_limit" and len(info.value.attempts) == 3
    assert len(fake_openai.requests) == 3
    waits = [a.waited_s for a in info.value.attempts]
    # base * 2^(n-1) plus at most 25% jitter: 0.01..0.0125 s, then 0.02..0.025 s
    assert waits[0] == 0 and 0.01 <= waits[1] <= 0.0135 and 0.02 <= waits[2] <= 0.026
    usage = gateway.usage()[MODEL]
    assert usage["failed_calls"] == 1 and usage["attempts"] == 3 and usage["calls"] == 0


def test_retry_after_header_is_honoured(fake_openai, key):
    fake_openai.push(error(429, headers={"Retry-After": "0.4"}), text("ok"))
    reply = run(req(fake_openai))
    assert reply.attempts[1].waited_s >= 0.4


def test_hang_times_out_then_retry_succeeds(fake_openai, key):
    fake_openai.push(hang(1.5), text("fast now"))
    started = time.perf_counter()
    reply = run(req(fake_openai, timeout_s=0.5, max_retries=1))
    assert reply.text == "fast now" and time.perf_counter() - started < 1.4
    assert reply.attempts[0].error.startswith("timeout: ")


def test_hang_exhausts_retries_as_timeout(fake_openai, key):
    fake_openai.push(hang(1.5), hang(1.5))
    with pytest.raises(LLMError) as info:
        run(req(fake_openai, timeout_s=0.4, max_retries=1))
    assert info.value.kind == "timeout" and len(info.value.attempts) == 2


@pytest.mark.parametrize("status,kind", [(401, "auth"), (403, "auth"),
                                         (400, "bad_request"), (404, "not_found")])
def test_permanent_errors_fail_at_once(fake_openai, key, status, kind):
    fake_openai.push(error(status, f"Incorrect API key provided: {KEY}"), text("never"))
    with pytest.raises(LLMError) as info:
        run(req(fake_openai, max_retries=3))
    err = info.value
    assert err.kind == kind and len(err.attempts) == 1 and len(fake_openai.requests) == 1
    message = str(err)
    assert KEY not in message and KEY not in err.attempts[0].error and "\n" not in message
    assert f"HTTP {status}" in message
    if kind == "auth":
        assert "OPENAI_API_KEY" in message


def test_unreachable_endpoint_is_a_clear_server_error(key):
    with socket.socket() as sock:  # a port that nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(LLMError) as info:
        run(LLMRequest(model=MODEL, base_url=f"http://127.0.0.1:{port}/v1", messages=[USER],
                       role="market", max_retries=1, timeout_s=5))
    assert info.value.kind == "server" and "could not connect" in str(info.value)
    assert len(info.value.attempts) == 2


def test_concurrency_cap_per_provider(fake_openai, key):
    fake_openai.push(*[hang(0.25) for _ in range(6)])
    gateway = LLMGateway(concurrency_per_provider={"openai": 2}, retry_base_s=0.01)

    async def many():
        return await asyncio.gather(*(gateway.complete(req(fake_openai)) for _ in range(6)))

    replies = asyncio.run(many())
    assert len(replies) == 6 and fake_openai.peak_active == 2
    assert gateway.peak_in_flight[fake_openai.url.rstrip("/")] == 2  # keyed by endpoint
    assert gateway.usage()[MODEL]["calls"] == 6


def test_smart_mode_answers_any_role(fake_openai, key):
    analyst = run(req(fake_openai, tools=[TOOL]))
    assert analyst.tool_calls[0].arguments == {"symbol": "NVDA", "indicator": "rsi",
                                               "curr_date": "2024-05-10"}
    plan = run(req(fake_openai, role="research_manager", output_schema="ResearchPlan"))
    assert plan.output_mode == "structured" and plan.structured["recommendation"] == "Hold"
    debate = run(req(fake_openai, role="bull"))
    assert debate.output_mode == "freetext" and "Rating: Hold" in debate.text


def test_thinking_model_gets_its_reasoning_back(fake_openai, monkeypatch):
    """deepseek-reasoner 400s unless reasoning_content returns with the tool-call turn."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    fake_openai.push(tool_calls(("get_indicators", {"symbol": "NVDA", "indicator": "rsi",
                                                    "curr_date": "2024-05-10"}),
                                reasoning="I need RSI first."), text("done"))
    gateway = LLMGateway(retry_base_s=0.01)
    model = "deepseek/deepseek-reasoner"
    first = run(req(fake_openai, model=model, tools=[TOOL], temperature=0.3), gateway)
    assert "temperature" not in fake_openai.requests[0]  # the row says it is not accepted
    call = first.tool_calls[0]
    messages = [USER, Message(role="assistant", tool_calls=[call]),
                Message(role="tool", tool_call_id=call.id, name=call.name, content="63.1")]
    run(req(fake_openai, model=model, tools=[TOOL], messages=messages), gateway)
    assistant = next(m for m in fake_openai.requests[1]["messages"] if m["role"] == "assistant")
    assert assistant.get("reasoning_content") == "I need RSI first."
