"""The DeepSeek V4+ ("flash" / "pro") and MiniMax capability rows, re-checked for issue 12
against DeepSeek's thinking-mode guide, MiniMax's chat-completions reference and litellm's
bundled model map (sources in providers/capabilities.py), and what they put on the wire."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from events.records import Message, ToolSpec
from providers.base import LLMRequest
from providers.capabilities import resolve
from providers.litellm_client import build_kwargs, plan_for

THINKING_DEEPSEEK = ["deepseek/deepseek-v4-flash", "deepseek/deepseek-v4-pro",
                     "deepseek/deepseek-v4.1-flash", "deepseek/deepseek-v5-pro",
                     "deepseek/deepseek-v5-flash", "deepseek/deepseek-flash",
                     "deepseek/deepseek-pro", "deepseek/deepseek-reasoner"]
SPLIT_MINIMAX = ["minimax/MiniMax-M2", "minimax/MiniMax-M2.1", "minimax/MiniMax-M2.5",
                 "minimax/MiniMax-M2.5-lightning", "minimax/MiniMax-M3",
                 "fireworks_ai/accounts/fireworks/models/minimax-m3"]
NO_SPLIT_MINIMAX = ["minimax/MiniMax-Text-01", "minimax/abab6.5s-chat",
                    "nvidia_nim/minimaxai/minimax-m3"]


@pytest.mark.parametrize("model", THINKING_DEEPSEEK)
def test_deepseek_thinking_models(model):
    caps = resolve(model)
    assert caps.resend_reasoning and caps.reasoning == "thinking"
    assert not caps.json_schema and not caps.tool_choice and not caps.temperature
    assert caps.tools


@pytest.mark.parametrize("model", ["deepseek/deepseek-chat", "deepseek/deepseek-prover-v2",
                                   "deepseek/deepseek-coder"])
def test_deepseek_non_thinking_models_keep_their_rows(model):
    caps = resolve(model)
    assert not caps.resend_reasoning and caps.temperature and not caps.json_schema


@pytest.mark.parametrize("model", SPLIT_MINIMAX)
def test_minimax_thinking_models_get_reasoning_split(model):
    caps = resolve(model)
    assert caps.extra_body == {"reasoning_split": True}
    assert not caps.json_schema and not caps.tool_choice


@pytest.mark.parametrize("model", NO_SPLIT_MINIMAX)
def test_minimax_models_that_reject_or_ignore_reasoning_split_never_get_it(model):
    caps = resolve(model)
    assert "reasoning_split" not in caps.extra_body
    assert not caps.json_schema and not caps.tool_choice


def _wire(model: str, schema: str | None = "TradeProposal") -> dict:
    request = LLMRequest(model=model, role="trader", temperature=0.2, output_schema=schema,
                         messages=[Message(role="user", content="decide")],
                         tools=[ToolSpec(name="t", description="d", parameters={
                             "type": "object", "properties": {}})])
    caps = resolve(model)
    return build_kwargs(request, caps, plan_for(request, caps))


def test_what_goes_on_the_wire():
    deepseek = _wire("deepseek/deepseek-v4-pro")
    assert "temperature" not in deepseek and "response_format" not in deepseek
    assert "tool_choice" not in deepseek  # the schema is offered as a tool, not forced
    assert {t["function"]["name"] for t in deepseek["tools"]} == {"t", "submit_TradeProposal"}
    assert _wire("minimax/MiniMax-M3")["extra_body"] == {"reasoning_split": True}
    assert "extra_body" not in _wire("nvidia_nim/minimaxai/minimax-m3")
    assert "extra_body" not in _wire("minimax/MiniMax-Text-01")


def test_rows_agree_with_litellms_model_map():
    """Where litellm's bundled map knows a model, our row never claims more: no tools where
    it lists no function calling, and the thinking rows are models it lists as reasoning."""
    import litellm
    table = json.loads((Path(litellm.__file__).parent
                        / "model_prices_and_context_window_backup.json").read_text())
    checked = 0
    for model in THINKING_DEEPSEEK + SPLIT_MINIMAX:
        row = table.get(model)
        if row is None:
            continue
        checked += 1
        assert row.get("supports_reasoning"), model
        if not row.get("supports_function_calling", True):
            assert model == "deepseek/deepseek-reasoner"  # our own row predates the map
    assert checked >= 6
