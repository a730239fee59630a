"""Capability resolution, the key map, the catalog, schemas on the wire, redaction."""
from __future__ import annotations

import pickle

import pytest

from events.decisions import DECISION_SCHEMAS
from providers import structured as st
from providers.base import LLMError, one_line, provider_of
from providers.capabilities import DEFAULT, resolve
from providers.catalog import model_warning
from providers.credentials import MissingKeyError, check_keys
from providers.keys import KEY_ENV

ALL_KEY_VARS = {n for alts in KEY_ENV.values() for alt in alts for n in alt.split("+")}


@pytest.fixture
def no_keys(monkeypatch):
    for name in ALL_KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# --- capabilities -------------------------------------------------------------------------

def test_exact_id_wins_over_pattern():
    caps = resolve("deepseek/deepseek-reasoner")
    assert caps.source == "id:deepseek/deepseek-reasoner"
    assert (caps.temperature, caps.json_schema, caps.tool_choice, caps.resend_reasoning) == (
        False, False, False, True)


def test_pattern_covers_new_variants_and_order_matters():
    assert resolve("deepseek/deepseek-v5-reasoner").resend_reasoning  # forward compatible
    assert resolve("deepseek/deepseek-v5-reasoner").source == "pattern:deepseek/*reason*"
    assert not resolve("deepseek/deepseek-v5-chat").resend_reasoning
    assert resolve("openai/o3").temperature is False
    assert resolve("openai/gpt-5-mini").reasoning == "effort"
    assert resolve("ollama/deepseek-r1:14b").tools is False  # specific before ollama/*
    assert resolve("ollama/llama3.1").tools and not resolve("ollama/llama3.1").tool_choice
    assert resolve("minimax/MiniMax-M2").extra_body == {"reasoning_split": True}


def test_unknown_model_gets_default():
    assert resolve("openai/test-model") == DEFAULT
    assert resolve("somewhere/else") == DEFAULT
    assert DEFAULT.json_schema and DEFAULT.tool_choice and DEFAULT.temperature


def test_anthropic_asks_structure_through_a_tool():
    caps = resolve("anthropic/claude-sonnet-4-5")
    assert caps.json_schema is False and caps.tools and caps.tool_choice


# --- keys ---------------------------------------------------------------------------------

def test_missing_key_names_the_variable(no_keys):
    with pytest.raises(MissingKeyError) as info:
        check_keys(["offline/quick", "anthropic/claude-sonnet-4-5"])
    assert "ANTHROPIC_API_KEY" in str(info.value)
    assert info.value.kind == "config"
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("model,var", [
    ("openai/gpt-4.1-mini", "OPENAI_API_KEY"), ("gemini/gemini-2.5-pro", "GEMINI_API_KEY"),
    ("xai/grok-4", "XAI_API_KEY"), ("deepseek/deepseek-chat", "DEEPSEEK_API_KEY"),
    ("dashscope/qwen-plus", "DASHSCOPE_API_KEY"), ("zai/glm-4.6", "ZAI_API_KEY"),
    ("minimax/MiniMax-M2", "MINIMAX_API_KEY"), ("openrouter/x/y", "OPENROUTER_API_KEY"),
    ("azure/my-deployment", "AZURE_API_KEY"),
])
def test_each_hosted_provider_needs_its_key(no_keys, model, var):
    with pytest.raises(MissingKeyError, match=var):
        check_keys([model])
    no_keys.setenv(var, "test-value-123456")
    check_keys([model])  # now fine


def test_alternative_variables_and_bedrock_pairs(no_keys):
    no_keys.setenv("GOOGLE_API_KEY", "g-123456789")
    check_keys(["gemini/gemini-2.5-flash"])  # the second alternative is enough
    no_keys.setenv("AWS_ACCESS_KEY_ID", "AKIA0000000000000000")
    with pytest.raises(MissingKeyError) as info:  # half a pair is not enough
        check_keys(["bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"])
    assert "AWS_SECRET_ACCESS_KEY" in str(info.value) and "AWS_PROFILE" in str(info.value)
    no_keys.setenv("AWS_SECRET_ACCESS_KEY", "secret-000000000")
    check_keys(["bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"])
    no_keys.delenv("AWS_ACCESS_KEY_ID")
    no_keys.delenv("AWS_SECRET_ACCESS_KEY")
    no_keys.setenv("AWS_PROFILE", "research")
    check_keys(["bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"])


def test_local_models_need_no_key(no_keys):
    assert check_keys(["offline/quick", "offline/deep", "ollama/llama3.1",
                       "lm_studio/qwen2.5-7b", "hosted_vllm/meta/llama"]) == []
    assert check_keys(["openai/my-llamacpp-model"], base_url="http://127.0.0.1:8080/v1") == []
    with pytest.raises(MissingKeyError, match="provider/model"):
        check_keys(["gpt-4.1"])


# --- catalog ------------------------------------------------------------------------------

def test_catalog_warns_but_continues(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000000000")
    warnings = check_keys(["openai/gpt-4.1-mini", "openai/gpt-9-ultra"])
    assert len(warnings) == 1 and "gpt-9-ultra" in warnings[0] and "openai" in warnings[0]
    assert model_warning("openai/gpt-4.1-mini") is None
    assert model_warning("ollama/anything:latest") is None
    assert model_warning("openrouter/whoever/whatever") is None
    assert model_warning("openai/local-name", base_url="http://localhost:1234/v1") is None
    assert "not in the model catalog" in model_warning("mystery/model")


# --- schemas and the free-text fallback ---------------------------------------------------

@pytest.mark.parametrize("name", list(DECISION_SCHEMAS))
def test_strict_schema_lists_every_property(name):
    schema = st.strict_json_schema(name)
    assert "$defs" not in str(schema) and "$ref" not in str(schema)
    assert set(schema["required"]) == set(schema["properties"])
    assert schema["additionalProperties"] is False


def test_freetext_fallback_uses_the_one_rating_parser():
    plan = st.from_freetext("ResearchPlan", "Rating: Underweight\nRationale: trend broke\n"
                                            "Strategic Actions: trim by half")
    assert plan == {"recommendation": "Underweight", "rationale": "trend broke",
                    "strategic_actions": "trim by half"}
    trade = st.from_freetext("TradeProposal", "We sell.\nStop Loss: 101.25\n"
                                              "FINAL TRANSACTION PROPOSAL: **SELL**")
    assert trade["action"] == "Sell" and trade["stop_loss"] == 101.25
    assert trade["entry_price"] is None
    empty = st.from_freetext("PortfolioDecision", "")
    assert empty["rating"] == "Hold"
    assert st.validate("PortfolioDecision", empty) == empty


def test_validate_accepts_fenced_json_and_rejects_bad_values():
    good = '```json\n{"rating": "Sell", "executive_summary": "a", "investment_thesis": "b"}\n```'
    assert st.validate("PortfolioDecision", good)["rating"] == "Sell"
    assert st.validate("PortfolioDecision", '{"rating": "Strong Buy"}') is None
    assert st.validate("PortfolioDecision", "not json") is None
    with pytest.raises(LLMError) as info:
        st.validate("NoSuchSchema", {})
    assert info.value.kind == "config"


# --- errors -------------------------------------------------------------------------------

def test_errors_are_one_line_without_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefghijklmnop1234")
    err = LLMError("bad key sk-live-abcdefghijklmnop1234\nsee\tdocs; api_key=zz9876543210abc",
                   "auth")
    assert "abcdefghijklmnop" not in str(err) and "zz9876543210abc" not in str(err)
    assert "\n" not in str(err) and str(err).startswith("auth: ")
    assert "OPENAI_API_KEY" in one_line("set OPENAI_API_KEY: it is missing")
    copy = pickle.loads(pickle.dumps(MissingKeyError("needs X_KEY")))
    assert isinstance(copy, MissingKeyError) and copy.kind == "config" and "X_KEY" in str(copy)


def test_provider_of():
    assert provider_of("openai/gpt-4.1") == "openai"
    assert provider_of("openrouter/anthropic/claude") == "openrouter"
    assert provider_of("gpt-4.1") == ""
