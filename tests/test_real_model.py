"""A run against a real small model: llama.cpp's server with SmolLM2-135M on 127.0.0.1
(one slot, CPU, no tool calling, 4,096-token context), started for the session by
../shared/tools/local_llm/start.sh. Skipped with one line only where that server cannot run
(a CPU without AVX2); a server that should start but does not is a failure."""
from __future__ import annotations

import json

import pytest

from bench import local_llm
from bench.real_model import summarize
from events.duckdb_store import DuckDBEventStore
from events.rating import Rating


@pytest.fixture(scope="session")
def real_llm():
    """The real server for the session; stopped at the end only if this fixture started it."""
    try:
        server = local_llm.start()
    except local_llm.Unavailable as exc:
        pytest.skip(f"real local model unavailable: {exc}")
    yield server
    local_llm.stop(server)


@pytest.mark.timeout(1800)  # ~2-3 min on a quiet 2-core machine; far more when it is busy
def test_short_run_against_a_real_small_model(cli, real_llm, ohlcv_dir, store_path,
                                              monkeypatch):
    """The market and social analysts (their first calls race for the one slot), one round
    of each debate: the run completes with a valid rating; every call streamed and recorded
    its wait for the slot; the analysts' tools were called by their roles (SmolLM2 calls
    none); the window came from the server's /props (4,096 tokens) and, by the server's own
    token counts, no call exceeded it (the estimate uses the tokenizer as measured through
    /tokenize: SmolLM2 spends a token per digit)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = cli("run", "MSFT", "--date", "2024-06-14", "--data-dir", ohlcv_dir,
                 "--analysts", "market,social", "--quick-model", real_llm.model,
                 "--deep-model", real_llm.model, "--base-url", real_llm.url,
                 "--store", store_path, "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["status"] == "completed" and row["rating"] in {r.value for r in Rating}
    with DuckDBEventStore(store_path, read_only=True) as store:
        events = store.read_stream(row["run_id"])
        assert store.verify(row["run_id"]).ok
    figures = summarize(events)
    print("real model:", json.dumps(figures))
    calls = [e.payload for e in events if e.type == "LLMCallCompleted"]
    assert figures["llm_calls"] == len(calls) == 2 + 2 + 1 + 1 + 3 + 1
    # streaming: every call arrived in chunks, the first after a measured wait
    assert all(c.stream_chunks and c.stream_chunks > 1 and c.first_chunk_ms for c in calls)
    assert figures["tokens_per_s"] and figures["tokens_per_s"] > 1
    # queueing: recorded on every call; the two analysts' calls shared the one slot
    assert all(c.queued_ms is not None for c in calls)
    analysts = [c for c in calls if c.role in ("market", "social")]
    assert max(c.queued_ms for c in analysts) > 0
    # the roles called the default tools (no tool calling in this model)
    tools = [e.payload for e in events if e.type == "ToolCallCompleted"]
    assert {t.role for t in tools} == {"market", "social"}
    assert all(t.result.status == "ok" for t in tools if t.role == "market")
    assert len(analysts) == 2 and not any(c.tool_calls for c in analysts)
    # every prompt fitted the window with the reply's reserve (max_tokens 256), by the
    # server's own count
    assert all(c.input_tokens + c.output_tokens <= 4096 for c in calls)
    assert all(c.output_tokens <= 256 + 2 for c in calls)
    deciders = [c for c in calls if c.role in ("research_manager", "trader",
                                               "portfolio_manager")]
    assert len(deciders) == 3 and all(c.structured for c in deciders)
