"""One turn of one role in one run: plain Python over the run's live handle and two ports.

A turn speaks through the LLM port, fetches data through the market port, and records every
model and tool call as an event *before* using it. On a retry or a resume the recorded calls
are replayed instead of made again, so a turn never pays twice for the same call. The
output event goes back to the run's driver, which alone decides whether it is in turn.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from actors import prompts
from actors.ports import LLMPort, MarketPort
from data.tools import TOOL_SPECS, default_calls
from events import domain as d
from events.decisions import DECISION_SCHEMAS, SentimentReport
from events.errors import one_line
from events.records import Message, ToolCall, ToolResult
from events.roles import DEEP_ROLES, ROLES, SCHEMA_OF_ROLE, TOOLS_OF_ROLE
from projections.schedule import Turn
from providers.base import LLMError, LLMReply, LLMRequest, provider_of
from providers.endpoints import ModelProfile
from providers.fitting import WIRE_TOKENS, Condensing, fit, reply_reserve, trim_tool_messages
from providers.structured import from_freetext

if TYPE_CHECKING:
    from actors.driving import RunHandle

#: Decision event for each structured schema, and the field that carries the decision.
_DECISION_EVENT: dict[str, tuple[str, type[d.DomainEvent]]] = {
    "ResearchPlan": ("plan", d.InvestmentPlanIssued),
    "TradeProposal": ("proposal", d.TradeProposed),
    "PortfolioDecision": ("decision", d.PortfolioDecisionIssued),
}


class TurnFailed(Exception):
    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


#: The profile of a model nothing is known about (and of the offline model): send prompts
#: as built, offer tools.
UNKNOWN_PROFILE = ModelProfile(context_window=None, context_source="unknown", tools=True,
                               tools_source="default", concurrency=1, local=False)
#: After a server said "context exceeded" anyway, the prompt is fitted again to this share
#: of the budget (once): the estimate was too optimistic for this model's tokenizer.
REFIT_SHARE = 0.6


def model_of(config: Any, role: str) -> str:
    return config.deep_model if role in DEEP_ROLES else config.quick_model


def llm_request(config: Any, role: str, messages: list[Message], tools: list,
                schema: str | None, *, run_id: str | None = None,
                profile: ModelProfile | None = None) -> LLMRequest:
    """The request of one call; with a known context ``window`` the reply gets its reserve
    as max_tokens and the gateway checks the prompt against the rest."""
    deep = role in DEEP_ROLES
    window = profile.context_window if profile else None
    return LLMRequest(model=model_of(config, role),
                      messages=messages, tools=tools, output_schema=schema, role=role,
                      tier="deep" if deep else "quick", base_url=config.base_url,
                      temperature=config.temperature, timeout_s=config.llm_timeout_s,
                      idle_timeout_s=config.llm_idle_timeout_s,
                      max_retries=config.llm_max_retries,
                      output_language=config.output_language,
                      offline_latency_s=config.offline_latency_s, run_id=run_id,
                      max_output_tokens=reply_reserve(window) if window else None,
                      context_window=window, concurrency=config.llm_concurrency,
                      chars_per_token=(profile or UNKNOWN_PROFILE).chars_per_token)


def completed_call(turn_id: str, role: str, index: int, request: LLMRequest,
                   reply: LLMReply, condensed: list[str] | None = None) -> d.LLMCallCompleted:
    return d.LLMCallCompleted(
        turn_id=turn_id, role=role, call_index=index, tier=request.tier, model=reply.model,
        provider=reply.provider, messages=request.messages, response_text=reply.text,
        tool_calls=reply.tool_calls, structured=reply.structured,
        output_mode=reply.output_mode, input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens, cost_usd=reply.cost_usd,
        latency_ms=reply.latency_ms, attempts=reply.attempts,
        queued_ms=None if reply.provider == "offline" else reply.queued_ms,
        stream_chunks=reply.stream_chunks or None, first_chunk_ms=reply.first_chunk_ms,
        condensed=list(condensed or []))


#: Builds a call's messages for a condensing level (the role's prompt, cut to fit).
Build = Callable[[Condensing], list[Message]]


class RoleTurn:
    def __init__(self, run: RunHandle, turn: Turn, llm: LLMPort, market: MarketPort):
        self.run, self.turn, self.llm, self.market = run, turn, llm, market
        self.role = turn.role
        self.start = run.state  # what the role is shown: the run as the turn began
        self.recorded = list(self.start.calls.get(turn.turn_id, ()))
        self.actor = f"role:{self.role}"
        #: the turn's last model call, made but not yet recorded: it is appended together
        #: with the output it yields (one store round trip less per turn, same guarantee —
        #: a crash before that append loses the call either way)
        self.unrecorded: list[d.LLMCallCompleted] = []

    def _recorded(self, cls: type, **match: Any) -> Any:
        for e in self.recorded:
            if isinstance(e, cls) and all(getattr(e, k) == v for k, v in match.items()):
                return e
        return None

    def _may_proceed(self) -> None:
        """Before a new model or tool call: the run must still be going (another turn may
        have failed it) and within its budget. The handle's state is the run's latest."""
        state = self.run.state
        if state.finished:
            raise TurnFailed("interrupted", f"the run is already {state.status}")
        reason = state.budget_exceeded()
        if reason:
            raise TurnFailed("budget", reason)

    async def _record(self, payload: d.DomainEvent, key: str) -> None:
        await self.run.record(payload, key=key, actor=self.actor, cause=self.turn.turn_id)

    async def profile(self) -> ModelProfile:
        """The context window and tool calling of this role's model (asked of the gateway,
        which probes a local server once); the offline model needs neither."""
        config = self.start.config
        model = model_of(config, self.role)
        if provider_of(model) == "offline":
            return UNKNOWN_PROFILE
        return await self.llm.profile(model, config.base_url,
                                      context_window=config.context_window,
                                      concurrency=config.llm_concurrency)

    async def call_model(self, index: int, messages: list[Message] | Build, tools: list,
                         schema: str | None = None, final: bool = False,
                         profile: ModelProfile | None = None) -> d.LLMCallCompleted:
        """Model call ``index`` of this turn: replayed if recorded, else made and recorded
        (a ``final`` call is left in ``unrecorded``, to go with the turn's output).

        ``messages`` may be a builder: with a known context window (``profile``) the prompt
        is condensed to fit (what was cut goes on the event); one that cannot fit is never
        sent, and the call fails as "context"."""
        done = self._recorded(d.LLMCallCompleted, call_index=index)
        if done is not None:
            return done
        self._may_proceed()
        build: Build = messages if callable(messages) else (lambda _level: list(messages))
        config = self.start.config
        profile = profile or UNKNOWN_PROFILE
        window = profile.context_window
        budget = window - reply_reserve(window) - WIRE_TOKENS if window else None
        failures: list = []
        while True:
            condensed: list[str] = []
            request = llm_request(config, self.role, build(prompts.WHOLE), tools, schema,
                                  run_id=self.run.run_id, profile=profile)
            sent = False
            try:
                if budget is not None:
                    fitted = fit(build, budget=budget, tools=tools,
                                 chars_per_token=profile.chars_per_token)
                    if fitted is None:
                        raise LLMError(
                            f"{request.model}: the {self.role} prompt does not fit the "
                            f"{window or 0:,}-token context window even condensed; use a model "
                            "with a larger context or --context-window", "context")
                    condensed = fitted.level.describe()
                    request = request.model_copy(update={"messages": fitted.messages})
                sent = True
                reply: LLMReply = await self.llm.complete(request)
                break
            except LLMError as exc:
                cause = getattr(exc, "cause", None) or exc  # Ray wraps the gateway's exception
                attempts = list(getattr(cause, "attempts", []) or [])
                message = one_line(cause)
                await self._record(d.LLMCallFailed(
                    turn_id=self.turn.turn_id, role=self.role, call_index=index,
                    model=request.model, error=message, attempts=attempts),
                    f"{self.turn.turn_id}:llm-failed:{index}:{len(attempts)}:{len(failures)}")
                failures.append(message)
                if (sent and getattr(cause, "kind", None) == "context" and budget is not None
                        and len(failures) == 1):
                    budget = int(budget * REFIT_SHARE)  # the server counted more: cut more
                    continue
                raise TurnFailed("llm", f"{self.role}: {message}") from None
        event = completed_call(self.turn.turn_id, self.role, index, request, reply, condensed)
        if final:
            self.unrecorded.append(event)
        else:
            await self._record(event, f"{self.turn.turn_id}:llm:{index}")
        return event

    async def _record_unrecorded(self) -> None:
        for event in self.unrecorded:
            await self._record(event, f"{self.turn.turn_id}:llm:{event.call_index}")
        self.unrecorded = []

    async def call_tools(self, index: int, calls: list[ToolCall], *,
                         recording: Coroutine[Any, Any, None] | None = None
                         ) -> list[ToolResult]:
        """The tool calls of model reply ``index``: replayed where recorded; the others made
        in one round trip to market data and recorded together, before any result is used.
        ``recording`` (the append of the reply that asked for them) runs while they are
        fetched, and is done before their results are recorded: a store round trip less per
        tool round, and the order of events is kept."""
        pending = asyncio.ensure_future(recording) if recording is not None else None
        try:
            return await self._call_tools(index, calls, pending)
        finally:
            if pending is not None and not pending.done():
                await pending

    async def _call_tools(self, index: int, calls: list[ToolCall],
                          recording: asyncio.Future | None) -> list[ToolResult]:
        results: dict[int, ToolResult] = {}
        todo: list[tuple[int, ToolCall]] = []
        allowed = TOOLS_OF_ROLE.get(self.role, ())
        for j, tc in enumerate(calls):
            done = self._recorded(d.ToolCallCompleted, call_id=self._call_id(index, j))
            if done is not None:
                results[j] = done.result
            else:
                todo.append((j, tc))
        if not todo:
            if recording is not None:
                await recording
            return [results[j] for j in range(len(calls))]
        self._may_proceed()
        known = [(j, tc) for j, tc in todo if tc.name in allowed]
        config = self.start.config
        answers = await self.market.call_tools([(tc.name, tc.arguments) for _, tc in known],
                                               config.trade_date, config) if known else []
        if recording is not None:
            await recording  # the reply is recorded before the results it asked for
        latency = {j: 0.0 for j, _ in todo}
        for (j, tc), (result, problem, ms) in zip(known, answers, strict=True):
            if result is None:  # no vendor answered at all
                raise TurnFailed("data", f"{tc.name}: {problem}")
            results[j], latency[j] = result, ms
        for j, tc in todo:
            if tc.name not in allowed:
                results[j] = ToolResult(status="error", text=(
                    f"unknown tool {tc.name!r} for the {self.role} analyst; available: "
                    f"{', '.join(allowed)}"))
        events = [d.ToolCallCompleted(turn_id=self.turn.turn_id, role=self.role,
                                      call_id=self._call_id(index, j), tool=tc.name,
                                      arguments=tc.arguments, result=results[j],
                                      latency_ms=latency[j]) for j, tc in todo]
        await self.run.record_all(events, key=f"{self.turn.turn_id}:tools:{index}",
                                  actor=self.actor, cause=self.turn.turn_id)
        return [results[j] for j in range(len(calls))]

    def _call_id(self, index: int, j: int) -> str:
        return f"{self.turn.turn_id}:tool:{index}:{j}"

    # ---- the turn -----------------------------------------------------------------------
    async def run_turn(self) -> d.DomainEvent:
        profile = await self.profile()
        system = Message(role="system", content=prompts.SYSTEM[self.role])

        def build(level: Condensing) -> list[Message]:
            return [system, Message(role="user",
                                    content=prompts.user_message(self.role, self.start, level))]

        if ROLES[self.role].stage == "analyst":
            if not profile.tools:
                return await self._analyst_without_tools(system, profile)
            return await self._analyst(build(prompts.WHOLE), profile)
        schema = SCHEMA_OF_ROLE.get(self.role)
        call = await self.call_model(0, build, [], schema, final=True, profile=profile)
        return self._output(call, schema)

    async def _analyst_without_tools(self, system: Message,
                                     profile: ModelProfile) -> d.DomainEvent:
        """For a model that cannot call tools: the role calls the analyst's default tools
        itself (one recorded ToolCallCompleted each, as if the model had asked), puts the
        results in the prompt and has the report written in one call."""
        config = self.start.config
        planned = default_calls(self.role, config.ticker, config.trade_date)
        planned = planned[:config.max_tool_calls]
        calls = [ToolCall(id=f"{self.turn.turn_id}:default:{j}", name=name, arguments=args)
                 for j, (name, args) in enumerate(planned)]
        results = await self.call_tools(0, calls)
        gathered = [(c.name, c.arguments, r) for c, r in zip(calls, results, strict=True)]
        task = prompts.user_message(self.role, self.start)

        def build(level: Condensing) -> list[Message]:
            return [system, Message(role="user", content=(
                f"{task}\n\n{prompts.tool_results_block(gathered, level)}"))]

        call = await self.call_model(1, build, [], final=True, profile=profile)
        text = call.response_text.strip() or "(the model returned an empty report)"
        return d.AnalystReportSubmitted(turn_id=self.turn.turn_id, analyst=self.role,
                                        report=text)

    async def _analyst(self, messages: list[Message],
                       profile: ModelProfile = UNKNOWN_PROFILE) -> d.DomainEvent:
        cap = self.start.config.max_tool_calls
        tools = [TOOL_SPECS[n] for n in TOOLS_OF_ROLE[self.role]]
        used, index, capped = 0, 0, False  # replay re-walks the loop from recorded calls
        while True:
            # any call may be the last (no tool calls asked): it waits for the output, and is
            # recorded at once only when the loop goes on
            sent = messages

            def build(level: Condensing, sent: list[Message] = sent) -> list[Message]:
                return trim_tool_messages(sent, level)

            call = await self.call_model(index, build, [] if capped else tools, final=True,
                                         profile=profile)
            messages = messages + [Message(role="assistant", content=call.response_text,
                                           tool_calls=call.tool_calls)]
            if not call.tool_calls or capped:
                text = call.response_text.strip() or "(the model returned an empty report)"
                return await self._report(text, messages, index + 1)
            allowed = call.tool_calls[:max(0, cap - used)]  # the tool calls of one reply
            # the loop goes on, so the call is used now: it is recorded while its tools are
            # fetched (independent: together), and before their results are
            results = await self.call_tools(index, allowed, recording=self._record_unrecorded())
            skipped = ToolResult(status="error", text="not executed: tool-call cap reached")
            results += [skipped] * (len(call.tool_calls) - len(allowed))
            for tc, result in zip(call.tool_calls, results, strict=True):
                messages.append(Message(role="tool", content=result.text, tool_call_id=tc.id,
                                        name=tc.name))
            used += len(allowed)
            capped = used >= cap
            if capped:  # recorded once: the key makes a replayed append a no-op
                await self._record(d.ToolCapReached(turn_id=self.turn.turn_id, role=self.role,
                                                    cap=cap), f"{self.turn.turn_id}:cap")
                messages.append(Message(role="user", content=prompts.CAP_REACHED))
            index += 1

    async def _report(self, text: str, messages: list[Message], index: int
                      ) -> d.AnalystReportSubmitted:
        """The analyst's report; for the social analyst (the role with a structured report,
        SCHEMA_OF_ROLE) also its SentimentReport: read from the report's own labelled
        "Sentiment:" line when it has one (no extra call), else asked for once with the
        schema (native structured output where the model allows, else the free-text
        fallback). The narrative is always the report the analyst wrote."""
        t, schema = self.turn, SCHEMA_OF_ROLE.get(self.role)
        if schema is None:
            return d.AnalystReportSubmitted(turn_id=t.turn_id, analyst=self.role, report=text)
        own_line = SentimentReport.freetext_fields(text)
        if own_line:
            read = SentimentReport.model_validate(  # no confidence given: low
                {"confidence": "low", **own_line, "narrative": text})
            return d.AnalystReportSubmitted(turn_id=t.turn_id, analyst=self.role,
                                            report=read.render(), sentiment=read,
                                            output_mode="freetext")
        await self._record_unrecorded()  # the report call is used now: record it first
        ask = messages + [Message(role="user", content=prompts.STRUCTURE_REPORT)]
        call = await self.call_model(index, ask, [], schema, final=True)
        try:
            fields = SentimentReport.model_validate(call.structured or {}).model_dump()
        except Exception:  # the gateway guarantees validity; stay safe on old events
            fields = from_freetext(schema, call.response_text)
        structured = SentimentReport.model_validate({**fields, "narrative": text})
        return d.AnalystReportSubmitted(turn_id=t.turn_id, analyst=self.role,
                                        report=structured.render(), sentiment=structured,
                                        output_mode=call.output_mode)

    def _output(self, call: d.LLMCallCompleted, schema: str | None) -> d.DomainEvent:
        t, text = self.turn, call.response_text.strip()
        if schema is not None:
            try:
                decision = DECISION_SCHEMAS[schema].model_validate(call.structured or {})
            except Exception:  # the gateway guarantees validity; stay safe on old events
                decision = DECISION_SCHEMAS[schema].model_validate(from_freetext(schema, text))
            field, event = _DECISION_EVENT[schema]
            return event(turn_id=t.turn_id, output_mode=call.output_mode, **{field: decision})
        if ROLES[self.role].stage == "debate":
            return d.DebateArgumentMade(turn_id=t.turn_id, speaker=self.role, round=t.round,
                                        argument=text)
        return d.RiskArgumentMade(turn_id=t.turn_id, speaker=self.role, round=t.round,
                                  argument=text)
