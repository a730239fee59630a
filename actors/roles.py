"""Role actors: thin, shared, async. One actor per role serves every run in flight.

A role turn reads the run's projection, speaks through the LLM gateway, fetches data through
the market-data actor, and records every model and tool call as an event *before* using it.
On a retry or a resume the recorded calls are replayed instead of made again, so a turn never
pays twice for the same call. The output event is returned to the coordinator, which alone
decides whether it is in turn.
"""
from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import ray

from actors import prompts
from data.tools import TOOL_SPECS
from events import domain as d
from events.decisions import DECISION_SCHEMAS
from events.envelope import NewEvent
from events.records import Message, ToolResult
from projections.run_state import RunState, project
from projections.schedule import DEEP_ROLES, Turn
from providers.base import LLMError, LLMReply, LLMRequest
from providers.structured import from_freetext

#: Tools each analyst may call (the news analyst gets insider transactions bound, too).
ANALYST_TOOLS: dict[str, tuple[str, ...]] = {
    "market": ("get_stock_data", "get_indicators", "get_verified_market_snapshot"),
    "social": ("get_social_posts", "get_news"),
    "news": ("get_news", "get_global_news", "get_insider_transactions"),
    "fundamentals": ("get_fundamentals", "get_balance_sheet", "get_cashflow",
                     "get_income_statement", "get_insider_transactions"),
}
#: Structured output schema each deciding role asks for.
OUTPUT_SCHEMA: dict[str, str] = {"research_manager": "ResearchPlan", "trader": "TradeProposal",
                                 "portfolio_manager": "PortfolioDecision"}


class TurnFailed(Exception):
    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


class RoleTurn:
    """One turn of one role in one run; plain Python over three actor handles."""

    def __init__(self, role: str, store: Any, gateway: Any, market: Any, run_id: str,
                 turn: Turn, state: RunState):
        self.role, self.store, self.gateway, self.market = role, store, gateway, market
        self.run_id, self.turn, self.state = run_id, turn, state
        self.recorded = list(state.calls.get(turn.turn_id, ()))
        self.actor = f"role:{role}"

    # ---- recording helpers --------------------------------------------------------------
    async def _append(self, payload: d.DomainEvent, key: str) -> None:
        event = NewEvent(payload, self.actor, causation_id=self.turn.turn_id)
        await self.store.append.remote(self.run_id, [event], None, key)

    def _recorded(self, cls: type, **match: Any) -> Any:
        for e in self.recorded:
            if isinstance(e, cls) and all(getattr(e, k) == v for k, v in match.items()):
                return e
        return None

    def _request(self, messages: list[Message], tools: list, schema: str | None) -> LLMRequest:
        c = self.state.config
        deep = self.role in DEEP_ROLES
        return LLMRequest(model=c.deep_model if deep else c.quick_model, messages=messages,
                          tools=tools, output_schema=schema, role=self.role,
                          tier="deep" if deep else "quick", base_url=c.base_url,
                          temperature=c.temperature, timeout_s=c.llm_timeout_s,
                          max_retries=c.llm_max_retries, output_language=c.output_language,
                          offline_latency_s=c.offline_latency_s)

    async def _may_proceed(self) -> None:
        """Before a new model or tool call: the run must still be going (another turn may
        have failed it) and within its budget. Reads only the events this turn has not seen."""
        base = self.state  # tool calls run concurrently: fold onto what this read started from
        fresh = project(await self.store.read_stream.remote(self.run_id, base.version + 1), base)
        if fresh.version > self.state.version:
            self.state = fresh
        if self.state.finished:
            raise TurnFailed("interrupted", f"the run is already {self.state.status}")
        reason = self.state.budget_exceeded()
        if reason:
            raise TurnFailed("budget", reason)

    async def call_model(self, index: int, messages: list[Message], tools: list,
                         schema: str | None = None) -> d.LLMCallCompleted:
        """Model call number ``index`` of this turn: replayed if recorded, else made and recorded."""
        done = self._recorded(d.LLMCallCompleted, call_index=index)
        if done is not None:
            return done
        await self._may_proceed()
        request = self._request(messages, tools, schema)
        try:
            reply: LLMReply = await self.gateway.complete.remote(request)
        except LLMError as exc:
            cause = getattr(exc, "cause", None) or exc  # Ray wraps the gateway's exception
            attempts = list(getattr(cause, "attempts", []) or [])
            message = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
            await self._append(d.LLMCallFailed(
                turn_id=self.turn.turn_id, role=self.role, call_index=index,
                model=request.model, error=message, attempts=attempts),
                f"{self.turn.turn_id}:llm-failed:{index}:{len(attempts)}")
            raise TurnFailed("llm", f"{self.role}: {message}") from None
        event = d.LLMCallCompleted(
            turn_id=self.turn.turn_id, role=self.role, call_index=index, tier=request.tier,
            model=reply.model, provider=reply.provider, messages=messages,
            response_text=reply.text, tool_calls=reply.tool_calls, structured=reply.structured,
            output_mode=reply.output_mode, input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens, cost_usd=reply.cost_usd,
            latency_ms=reply.latency_ms, attempts=reply.attempts)
        await self._append(event, f"{self.turn.turn_id}:llm:{index}")
        return event

    async def call_tool(self, index: int, j: int, name: str, args: dict) -> ToolResult:
        call_id = f"{self.turn.turn_id}:tool:{index}:{j}"
        done = self._recorded(d.ToolCallCompleted, call_id=call_id)
        if done is not None:
            return done.result
        await self._may_proceed()
        started = asyncio.get_running_loop().time()
        if name not in ANALYST_TOOLS.get(self.role, ()):
            result = ToolResult(status="error", text=(
                f"unknown tool {name!r} for the {self.role} analyst; available: "
                f"{', '.join(ANALYST_TOOLS.get(self.role, ()))}"))
        else:
            try:
                result = await self.market.call_tool.remote(
                    name, args, self.state.config.trade_date, self.state.config)
            except Exception as exc:  # DataError: no vendor answered at all
                cause = getattr(exc, "cause", None) or exc
                raise TurnFailed("data", f"{name}: {str(cause).splitlines()[0]}") from None
        latency = (asyncio.get_running_loop().time() - started) * 1000
        await self._append(d.ToolCallCompleted(
            turn_id=self.turn.turn_id, role=self.role, call_id=call_id, tool=name,
            arguments=args, result=result, latency_ms=latency), call_id)
        return result

    # ---- the turn -----------------------------------------------------------------------
    async def run(self) -> d.DomainEvent:
        messages = [Message(role="system", content=prompts.SYSTEM[self.role]),
                    Message(role="user", content=prompts.user_message(self.role, self.state))]
        if self.role in ANALYST_TOOLS:
            return await self._analyst(messages)
        schema = OUTPUT_SCHEMA.get(self.role)
        call = await self.call_model(0, messages, [], schema)
        return self._output(call, schema)

    async def _analyst(self, messages: list[Message]) -> d.DomainEvent:
        cap = self.state.config.max_tool_calls
        tools = [TOOL_SPECS[n] for n in ANALYST_TOOLS[self.role]]
        used, index, capped = 0, 0, False  # replay re-walks the loop from recorded calls
        while True:
            call = await self.call_model(index, messages, [] if capped else tools)
            messages = messages + [Message(role="assistant", content=call.response_text,
                                           tool_calls=call.tool_calls)]
            if not call.tool_calls or capped:
                text = call.response_text.strip() or "(the model returned an empty report)"
                return d.AnalystReportSubmitted(turn_id=self.turn.turn_id, analyst=self.role,
                                                report=text)
            allowed = call.tool_calls[:max(0, cap - used)]  # the tool calls of one reply
            results = await asyncio.gather(*(  # are independent: fetch them together
                self.call_tool(index, j, tc.name, tc.arguments) for j, tc in enumerate(allowed)))
            skipped = ToolResult(status="error", text="not executed: tool-call cap reached")
            results += [skipped] * (len(call.tool_calls) - len(allowed))
            for tc, result in zip(call.tool_calls, results):
                messages.append(Message(role="tool", content=result.text, tool_call_id=tc.id,
                                        name=tc.name))
            used += len(allowed)
            capped = used >= cap
            if capped:  # recorded once: the key makes a replayed append a no-op
                await self._append(d.ToolCapReached(turn_id=self.turn.turn_id, role=self.role,
                                                    cap=cap), f"{self.turn.turn_id}:cap")
                messages.append(Message(role="user", content=prompts.CAP_REACHED))
            index += 1

    def _output(self, call: d.LLMCallCompleted, schema: str | None) -> d.DomainEvent:
        t, text = self.turn, call.response_text.strip()
        if schema is not None:
            data = call.structured or {}
            try:
                decision = DECISION_SCHEMAS[schema].model_validate(data)
            except Exception:  # the gateway guarantees validity; stay safe on old events
                decision = DECISION_SCHEMAS[schema].model_validate(from_freetext(schema, text))
            kind = {"ResearchPlan": ("plan", d.InvestmentPlanIssued),
                    "TradeProposal": ("proposal", d.TradeProposed),
                    "PortfolioDecision": ("decision", d.PortfolioDecisionIssued)}[schema]
            return kind[1](turn_id=t.turn_id, output_mode=call.output_mode,
                           **{kind[0]: decision})
        if self.role in ("bull", "bear"):
            return d.DebateArgumentMade(turn_id=t.turn_id, speaker=self.role, round=t.round,
                                        argument=text)
        return d.RiskArgumentMade(turn_id=t.turn_id, speaker=self.role, round=t.round,
                                  argument=text)


@ray.remote(num_cpus=0, max_concurrency=256)
class RoleActor:
    """Serves one role for every run in flight (async: turns interleave while models think)."""

    def __init__(self, role: str, gateway: Any, market: Any):
        self.role, self.gateway, self.market = role, gateway, market
        self.turns = 0

    async def act(self, store: Any, run_id: str, turn: Turn) -> d.DomainEvent:
        """The turn's output event, or a RunFailed saying why there is none."""
        state = project(await store.read_stream.remote(run_id))
        self.turns += 1
        try:
            return await RoleTurn(self.role, store, self.gateway, self.market, run_id, turn,
                                  state).run()
        except TurnFailed as exc:
            return d.RunFailed(kind=exc.kind, reason=str(exc), role=self.role)

    async def reflect(self, store: Any, config: Any, entry: dict) -> d.LLMCallCompleted:
        """A lesson on a past decision (the reflector role); recorded on the memory stream."""
        content = prompts.reflection_message(**entry["prompt"])
        messages = [Message(role="system", content=prompts.SYSTEM["reflector"]),
                    Message(role="user", content=content)]
        request = LLMRequest(model=config.quick_model, messages=messages, role="reflector",
                             tier="quick", base_url=config.base_url,
                             temperature=config.temperature, timeout_s=config.llm_timeout_s,
                             max_retries=config.llm_max_retries,
                             output_language=config.output_language,
                             offline_latency_s=config.offline_latency_s)
        reply: LLMReply = await self.gateway.complete.remote(request)
        return d.LLMCallCompleted(
            turn_id=f"reflect:{entry['run_id']}", role="reflector", call_index=0, tier="quick",
            model=reply.model, provider=reply.provider, messages=messages,
            response_text=reply.text, input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens, cost_usd=reply.cost_usd,
            latency_ms=reply.latency_ms, attempts=reply.attempts)

    def imported_heavy(self) -> list[str]:
        """Heavy libraries loaded in this process (there should be none)."""
        import sys
        return sorted(m for m in ("litellm", "pandas", "duckdb", "yfinance", "pandas_ta")
                      if m in sys.modules)

    def ping(self) -> str:
        return dt.datetime.now(dt.UTC).isoformat()
