"""Local models through the real gateway and litellm, over HTTP, against the fake
OpenAI-compatible server (the far side of the network): per-endpoint queueing with
queued_ms, streaming with an idle timeout and an overall cap, live tokens/s, context
windows from the server, "context exceeded" replies, prompts never sent oversized, and the
error lines a user can act on."""
from __future__ import annotations

import asyncio
import socket
import time

import pytest
from fake_openai_server import error, fake_openai, slow, stall, text  # noqa: F401
from test_cli_bounds import refused  # noqa: E402 - tests/ on sys.path

from events.records import Message
from providers.base import LLMError, LLMRequest
from providers.gateway import LLMGateway

MODEL = "openai/smollm2-135m"
USER = Message(role="user", content="Say something about MSFT.")
#: what llama.cpp's /props says about a one-slot server with a 4096-token context
PROPS = {"total_slots": 1, "default_generation_settings": {"n_ctx": 4096},
         "chat_template_caps": {"supports_tools": True}}
WORDS = " ".join(f"w{i}" for i in range(12))


def req(server, **kw) -> LLMRequest:
    base = dict(model=MODEL, base_url=server.url, messages=[USER], role="market",
                max_retries=0)
    return LLMRequest(**{**base, **kw})


def run(coro):
    return asyncio.run(coro)


def run_local(cli, server, ohlcv_dir, store_path, *options):
    """`ta-actors run MSFT --date 2024-06-14` on real prices, both tiers on ``server`` as a
    local model; the click Result."""
    return cli("run", "MSFT", "--date", "2024-06-14", "--data-dir", ohlcv_dir,
               "--quick-model", MODEL, "--deep-model", MODEL, "--base-url", server.url,
               "--store", store_path, "--json", *options)


def stored(store_path, run_id) -> list:
    from events.duckdb_store import DuckDBEventStore
    with DuckDBEventStore(store_path, read_only=True) as store:
        return store.read_stream(run_id)


def test_one_slot_server_queues_calls_and_records_the_wait(fake_openai):
    fake_openai.props = PROPS
    fake_openai.push(*[slow(WORDS, 0.03) for _ in range(3)])
    gateway = LLMGateway(retry_base_s=0.01)

    async def three():
        return await asyncio.gather(*(gateway.complete(req(fake_openai, role=r))
                                      for r in ("market", "social", "news")))

    replies = run(three())
    assert fake_openai.peak_active == 1  # the server's one slot, never more at once
    queued = sorted(r.queued_ms for r in replies)
    assert queued[0] < 100 and queued[2] > queued[1] > 300  # waited for the others' streams
    for reply in replies:
        assert reply.text.split() == WORDS.split()  # assembled from the stream, whole
        assert reply.stream_chunks >= 12 and reply.first_chunk_ms is not None
        # the wait is not part of the call's own time budget: latency includes it, the
        # attempt succeeded at once
        assert len(reply.attempts) == 1 and reply.latency_ms >= reply.queued_ms
    assert all(b["stream"] is True and b["stream_options"] == {"include_usage": True}
               for b in fake_openai.requests)


def test_waiting_for_the_slot_is_not_part_of_any_timeout(fake_openai):
    """Three ~1 s calls on one slot with a 2 s overall cap and a 1 s idle timeout: the
    third waits ~2 s for its slot and still completes on its first try."""
    fake_openai.props = PROPS
    fake_openai.push(*[slow(WORDS, 0.08) for _ in range(3)])
    gateway = LLMGateway(retry_base_s=0.01)

    async def three():
        return await asyncio.gather(*(gateway.complete(req(
            fake_openai, timeout_s=2.0, idle_timeout_s=1.0)) for _ in range(3)))

    replies = run(three())
    last = max(replies, key=lambda r: r.queued_ms)
    assert last.queued_ms > 1500 and last.latency_ms > 2000  # longer than the cap in all
    assert all(len(r.attempts) == 1 and r.attempts[0].status == 200 for r in replies)


@pytest.mark.parametrize("slots,flag,peak", [(2, None, 2), (1, 3, 3)])
def test_limit_from_server_slots_and_the_flag_wins(fake_openai, slots, flag, peak):
    fake_openai.props = dict(PROPS, total_slots=slots)
    fake_openai.push(*[slow(WORDS, 0.04) for _ in range(4)])
    gateway = LLMGateway(retry_base_s=0.01)

    async def four():
        return await asyncio.gather(*(gateway.complete(req(fake_openai, concurrency=flag))
                                      for _ in range(4)))

    run(four())
    assert fake_openai.peak_active == peak


def test_a_local_server_that_says_nothing_gets_one_call_at_a_time(fake_openai):
    fake_openai.push(*[slow(WORDS, 0.02) for _ in range(3)])  # no /props: 404
    gateway = LLMGateway(retry_base_s=0.01)

    async def three():
        return await asyncio.gather(*(gateway.complete(req(fake_openai)) for _ in range(3)))

    run(three())
    assert fake_openai.peak_active == 1


def test_slow_but_steady_completes_past_the_idle_timeout(fake_openai):
    # 12 words 0.25 s apart: 3 s in all, never 1 s without a token
    fake_openai.push(slow(WORDS, 0.25))
    started = time.perf_counter()
    reply = run(LLMGateway().complete(req(fake_openai, idle_timeout_s=1.0, timeout_s=30)))
    assert time.perf_counter() - started > 2.5
    assert reply.text.split() == WORDS.split() and reply.output_tokens > 0


def test_a_stalled_stream_fails_on_the_idle_timeout(fake_openai):
    fake_openai.push(stall(WORDS, after_words=3, seconds=5), stall(WORDS, 3, 5))
    started = time.perf_counter()
    with pytest.raises(LLMError) as info:
        run(LLMGateway(retry_base_s=0.01).complete(
            req(fake_openai, idle_timeout_s=0.6, timeout_s=30, max_retries=1)))
    assert time.perf_counter() - started < 4
    assert info.value.kind == "timeout" and "no token for 0.6 s" in str(info.value)
    assert len(info.value.attempts) == 2  # a timeout is retried


def test_the_overall_cap_ends_a_call_that_keeps_streaming(fake_openai):
    fake_openai.push(slow(WORDS, 0.3))
    with pytest.raises(LLMError) as info:
        run(LLMGateway().complete(req(fake_openai, idle_timeout_s=5, timeout_s=1.0)))
    assert info.value.kind == "timeout" and "--llm-timeout" in str(info.value)


def test_streams_show_tokens_per_second_while_a_call_streams(fake_openai):
    fake_openai.push(slow(" ".join(f"w{i}" for i in range(40)), 0.05))
    gateway = LLMGateway()
    seen: list[list[dict]] = []

    async def watch():
        task = asyncio.ensure_future(gateway.complete(req(fake_openai, run_id="MSFT-1")))
        while not task.done():
            await asyncio.sleep(0.3)
            seen.append(gateway.streams())
        return await task

    run(watch())
    rows = [row for snapshot in seen for row in snapshot if row["tokens_per_s"]]
    assert rows, seen
    assert {(r["run_id"], r["role"], r["model"]) for r in rows} == {("MSFT-1", "market", MODEL)}
    assert all(2 < r["tokens_per_s"] < 60 for r in rows)  # ~20 chunks/s from the server
    assert gateway.streams() == []  # gone once the call completes


def test_context_exceeded_is_classified_and_not_retried(fake_openai):
    fake_openai.push(error(400, "request (5031 tokens) exceeds the available context size "
                                "(4096 tokens), try increasing it"), text("never"))
    with pytest.raises(LLMError) as info:
        run(LLMGateway(retry_base_s=0.01).complete(req(fake_openai, max_retries=3)))
    assert info.value.kind == "context" and len(info.value.attempts) == 1
    assert len(fake_openai.requests) == 1


def test_a_prompt_over_the_window_is_never_sent(fake_openai):
    big = Message(role="user", content="x" * 30_000)
    with pytest.raises(LLMError) as info:
        run(LLMGateway().complete(req(fake_openai, messages=[big], context_window=4096)))
    assert info.value.kind == "context" and "4,096-token context window" in str(info.value)
    assert fake_openai.requests == []


def test_the_window_and_tool_calling_come_from_server_table_and_flag(fake_openai):
    fake_openai.props = PROPS
    gateway = LLMGateway()
    profile = run(gateway.profile(MODEL, fake_openai.url))
    assert profile.context_window == 4096 and profile.context_source == "llama.cpp /props"
    assert profile.tools is False and "smollm" in profile.tools_source  # the table says no
    assert profile.concurrency == 1 and profile.local
    flagged = run(gateway.profile(MODEL, fake_openai.url, context_window=2048, concurrency=2))
    assert flagged.context_window == 2048 and flagged.context_source == "--context-window"
    assert flagged.concurrency == 2
    # a model the table knows nothing about: the server's template decides tool calling
    fake_openai.props = dict(PROPS, chat_template_caps={"supports_tools": False})
    other = run(LLMGateway().profile("openai/some-local-model", fake_openai.url))
    assert other.tools is False and other.tools_source == "llama.cpp /props"
    # the server's tokenizer, measured on a sample (/tokenize): 1.5 chars a token, trusted
    # to 90%; without /tokenize the default 3 characters a token
    assert other.chars_per_token == 3.0
    fake_openai.chars_per_token = 1.5
    measured = run(LLMGateway().profile("openai/some-local-model", fake_openai.url))
    assert measured.chars_per_token == pytest.approx(1.35, abs=0.02)
    hosted = run(LLMGateway().profile("openai/gpt-4.1-mini"))
    assert hosted.context_window == 1_047_576 and hosted.tools and not hosted.local


def test_unreachable_local_server_says_to_start_it():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(LLMError) as info:
        run(LLMGateway(retry_base_s=0.01).complete(LLMRequest(
            model=MODEL, base_url=url, messages=[USER], role="market", max_retries=0)))
    message = str(info.value)
    assert f"could not connect to {url}" in message and "is the server running" in message
    assert "Start it" in message and "\n" not in message


def test_wrong_model_name_lists_the_servers_models(fake_openai):
    fake_openai.models = ["llama3.1:8b", "qwen2.5:7b"]
    fake_openai.push(error(404, "model 'llama3' not found"))
    with pytest.raises(LLMError) as info:
        run(LLMGateway().complete(req(fake_openai, model="openai/llama3")))
    message = str(info.value)
    assert info.value.kind == "not_found"
    assert "has no model 'llama3'" in message and "llama3.1:8b, qwen2.5:7b" in message
    assert "--quick-model openai/llama3.1:8b" in message


# ---- a whole run of a small local model (no tool calling, small context) -------------------
def test_run_with_a_model_that_cannot_call_tools(cli, fake_openai, ohlcv_dir, store_path,
                                                 monkeypatch):
    """SmolLM2's capability row says it cannot call tools: each analyst's default tools are
    called by the role (one ToolCallCompleted each), the report is written in one call, and
    with a 1,600-token window prompts are condensed to fit and say what was cut."""
    import json

    from data.tools import DEFAULT_CALLS
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_openai.props = PROPS
    # the first report streams for ~2.4 s: the other analyst's report call, sent once its
    # tools are in, must wait for the one slot (without it, whether the two calls overlap
    # depends on how fast market data answered)
    fake_openai.push(slow(WORDS, 0.2))
    result = run_local(cli, fake_openai, ohlcv_dir, store_path, "--analysts", "market,news",
                       "--context-window", "1600")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["status"] == "completed"
    events = stored(store_path, row["run_id"])
    tools = [e.payload for e in events if e.type == "ToolCallCompleted"]
    for analyst in ("market", "news"):
        mine = [t for t in tools if t.role == analyst]
        assert [(t.tool, t.arguments["curr_date" if "curr_date" in t.arguments else
                                     "end_date"]) for t in mine] == [
            (name, "2024-06-14") for name, _ in DEFAULT_CALLS[analyst]]
    market_ok = [t for t in tools if t.role == "market"]
    assert all(t.result.status == "ok" for t in market_ok)
    calls = [e.payload for e in events if e.type == "LLMCallCompleted"]
    analyst_calls = [c for c in calls if c.role in ("market", "news")]
    assert len(analyst_calls) == 2  # one call each: the report
    assert not any("tools" in body for body in fake_openai.requests)  # never offered tools
    market_call = next(c for c in analyst_calls if c.role == "market")
    assert market_ok[0].result.text.splitlines()[-1] in market_call.messages[-1].content
    # every call streamed, waited its turn on the one slot, and fitted the window
    assert all(c.stream_chunks and c.queued_ms is not None for c in calls)
    assert max(c.queued_ms for c in analyst_calls) > 0  # the two analysts shared one slot
    condensed = [c for c in calls if c.condensed]
    # the one prompt over 1,600 less the reply's 256 and 200 for the wire
    assert [c.role for c in condensed] == ["market"]
    assert "tool results to their newest" in condensed[0].condensed[0]
    assert "older rows cut to fit" in condensed[0].messages[-1].content
    assert all(b["max_tokens"] == 256 for b in fake_openai.requests)
    assert fake_openai.peak_active == 1


def test_live_table_shows_tokens_per_second_per_role():
    """What the terminal shows while calls stream (cli/display.py, fed by the gateway's
    ``streams()`` through the session)."""
    import datetime as dt

    from rich.console import Console

    from cli.display import progress_table
    from events import domain as d
    from events.config import RunConfig
    from projections.run_state import project
    config = RunConfig(ticker="MSFT", trade_date=dt.date(2024, 6, 14), quick_model=MODEL,
                       deep_model=MODEL)
    states = {"MSFT-1": project([d.RunRequested(run_id="MSFT-1", config=config)])}
    streams = [{"run_id": "MSFT-1", "role": "market", "model": MODEL, "tokens": 230,
                "seconds": 6.0, "tokens_per_s": 41.7},
               {"run_id": "MSFT-1", "role": "social", "model": MODEL, "tokens": 0,
                "seconds": 2.0, "tokens_per_s": None},
               {"run_id": "OTHER", "role": "news", "model": MODEL, "tokens": 5,
                "seconds": 1.0, "tokens_per_s": 3.0}]
    console = Console(record=True, width=250)
    console.print(progress_table(states, 0.0, streams))
    shown = console.export_text()
    assert "streaming" in shown and "market 42 tok/s (230 tok)" in shown
    assert "social waiting for 1st token (0 tok)" in shown and "news" not in shown
    console = Console(record=True, width=250)
    console.print(progress_table(states, 0.0))  # the offline model: no column
    assert "streaming" not in console.export_text()


def test_local_model_options_from_flags_and_variables(monkeypatch):
    """--llm-concurrency / --llm-idle-timeout / --llm-timeout / --context-window reach the
    run's config; their variables are the defaults; bad values are one line naming the flag."""
    from cli.options import build_configs
    from events.config import InvalidInput

    def config(**options):
        return build_configs(["MSFT"], "2024-06-14", "market", 1, 1, False, MODEL, MODEL,
                             "http://127.0.0.1:8080/v1", None, None, **options)[0]

    monkeypatch.setenv("TA_ACTORS_LLM_CONCURRENCY", "3")
    monkeypatch.setenv("TA_ACTORS_CONTEXT_WINDOW", "8192")
    plain = config()
    assert (plain.llm_concurrency, plain.context_window) == (3, 8192)
    assert (plain.llm_idle_timeout_s, plain.llm_timeout_s) == (120.0, None)
    flagged = config(llm_concurrency=2, context_window=4096, llm_idle_timeout_s=30.0,
                     llm_timeout_s=900.0)
    assert (flagged.llm_concurrency, flagged.context_window) == (2, 4096)
    assert (flagged.llm_idle_timeout_s, flagged.llm_timeout_s) == (30.0, 900.0)
    for options, flag in (({"context_window": 100}, "--context-window"),
                          ({"llm_concurrency": 0}, "--llm-concurrency"),
                          ({"llm_idle_timeout_s": 0.0}, "--llm-idle-timeout")):
        with pytest.raises(InvalidInput) as info:
            config(**options)
        assert flag in str(info.value) and "\n" not in str(info.value)


def test_a_resume_changes_only_the_local_model_settings():
    """RunResumed.settings apply to the run's config from there on: the four local-model
    settings (the same table the flags come from), never what the run researches."""
    from cli.options import LLM_OPTIONS, check_llm_settings
    from events import domain as d
    from events.config import RESUMABLE_SETTINGS, InvalidInput
    from projections.run_state import RunState, apply

    assert set(LLM_OPTIONS) == set(RESUMABLE_SETTINGS)
    config = build_config()
    s = apply(RunState(), d.RunRequested(run_id="MSFT-2024-06-14-00000000", config=config))
    s = apply(s, d.RunResumed(settings={"llm_idle_timeout_s": 300.0, "context_window": 8192,
                                        "debate_rounds": 9, "max_tool_calls": 1}))
    assert (s.config.llm_idle_timeout_s, s.config.context_window) == (300.0, 8192)
    assert (s.config.debate_rounds, s.config.max_tool_calls) == (config.debate_rounds,
                                                                 config.max_tool_calls)
    assert apply(s, d.RunResumed()).config == s.config  # a plain resume keeps them
    assert check_llm_settings(llm_concurrency=None, llm_timeout_s=60.0) == {"llm_timeout_s": 60.0}
    with pytest.raises(InvalidInput) as info:
        check_llm_settings(llm_concurrency=0)
    assert str(info.value).startswith("--llm-concurrency 0:")


def build_config():
    from cli.options import build_configs
    return build_configs(["MSFT"], "2024-06-14", "market", 1, 1, False, MODEL, MODEL,
                         "http://127.0.0.1:8080/v1", None, None)[0]


def test_a_context_exceeded_reply_is_fitted_again_not_resent(cli, fake_openai, ohlcv_dir,
                                                             store_path, monkeypatch):
    """The server counts more tokens than the estimate: its "context exceeded" reply is
    recorded, and the prompt is fitted again to 60% of the budget before it is sent again
    (never the same request twice)."""
    import json

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_openai.props = PROPS
    fake_openai.push(error(400, "request (2510 tokens) exceeds the available context size "
                                "(2048 tokens), try increasing it"))
    result = run_local(cli, fake_openai, ohlcv_dir, store_path, "--analysts", "market",
                       "--context-window", "2400")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    events = stored(store_path, row["run_id"])
    (failed,) = [e.payload for e in events if e.type == "LLMCallFailed"]
    assert failed.role == "market" and failed.error.startswith("context:")
    market = [e.payload for e in events if e.type == "LLMCallCompleted"
              and e.payload.role == "market"]
    assert len(market) == 1 and market[0].condensed  # fitted to the smaller budget
    first, second = fake_openai.requests[:2]
    assert first["messages"] != second["messages"]


def test_resume_and_fork_take_new_local_model_settings(cli, fake_openai, ohlcv_dir, store_path,
                                                       monkeypatch):
    """A run stopped on a slow local server is resumed with a longer idle timeout (recorded on
    RunResumed, applied from there on); a fork can change the endpoint's concurrency. Bad
    values are refused in one line before anything is written."""
    import json

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_openai.props = PROPS
    first = run_local(cli, fake_openai, ohlcv_dir, store_path, "--analysts", "market",
                      "--llm-idle-timeout", "0.5", "--token-budget", "1")
    (row,) = json.loads(first.stdout)
    assert row["status"] == "failed" and "token budget" in row["reason"], row
    run_id, stopped = row["run_id"], len(stored(store_path, row["run_id"]))

    bad = cli("resume", run_id, "--llm-idle-timeout", "0", "--store", store_path)
    refused(bad, "--llm-idle-timeout 0")
    assert len(stored(store_path, run_id)) == stopped  # nothing appended

    # the next reply stalls 1.5 s after two words: past the run's 0.5 s, within the new 5 s
    fake_openai.push(stall(WORDS, after_words=2, seconds=1.5))
    resumed = cli("resume", run_id, "--token-budget", "100000000", "--llm-idle-timeout", "5",
                  "--store", store_path, "--json")
    (row,) = json.loads(resumed.stdout)
    assert row["status"] == "completed", row
    after = [e.payload for e in stored(store_path, run_id)[stopped:]]
    (resume_event,) = [p for p in after if p.type == "RunResumed"]
    assert resume_event.settings == {"llm_idle_timeout_s": 5.0}
    stalled = next(p for p in after if p.type == "LLMCallCompleted")
    assert stalled.response_text.split() == WORDS.split()  # the stalled reply, in full
    assert [a.error for a in stalled.attempts] in ([], [None])  # one try: no timeout
    assert stalled.latency_ms > 1400

    refused(cli("fork", run_id, "--at", "trader", "--context-window", "100",
                "--store", store_path), "context_window (--context-window)")
    fork = cli("fork", run_id, "--at", "trader", "--llm-concurrency", "2", "--token-budget",
               "100000000", "--store", store_path, "--json")
    (forked,) = json.loads(fork.stdout)
    assert forked["status"] == "completed", (forked, fork.stderr)
    requested = stored(store_path, forked["run_id"])[0].payload
    assert requested.config.llm_concurrency == 2 and requested.config.llm_idle_timeout_s == 0.5
