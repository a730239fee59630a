"""What each model accepts, as data: exact model id, then glob pattern, then the default.

OpenAI-compatible APIs differ in small ways that break requests (a reasoning model that
rejects ``temperature``, a server that 400s on ``tool_choice``, a thinking model that wants
its reasoning sent back). Instead of model-name if-ladders in the client, every quirk is a
field here and onboarding a model is adding a row. A row lists only what differs from
``DEFAULT``. Lookup keys are the full "provider/model" id; patterns are fnmatch globs tried in
order, so put specific patterns before general ones.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace
from typing import Any, Literal


@dataclass(frozen=True)
class Capabilities:
    temperature: bool = True          # accepts a non-default temperature
    tools: bool = True                # function calling at all
    tool_choice: bool = True          # accepts tool_choice forcing a named function
    json_schema: bool = True          # response_format {"type": "json_schema", ...}
    parallel_tool_calls: bool = True  # several tool calls in one turn
    reasoning: Literal["none", "effort", "thinking"] = "none"  # which knob, if any
    resend_reasoning: bool = False    # reasoning_content must go back with tool-call turns
    extra_body: dict[str, Any] = field(default_factory=dict)  # sent verbatim
    #: tokens the model reads (prompt + reply); None: unknown here (a local server's own
    #: figure or --context-window may say)
    context_window: int | None = None
    source: str = "default"           # which row matched (for logs and tests)


DEFAULT = Capabilities()

# DeepSeek in thinking mode (api-docs.deepseek.com/guides/thinking_mode, re-checked for
# issue 12; litellm's bundled model_prices_and_context_window.json lists deepseek-v4-flash
# and deepseek-v4-pro with function calling and reasoning): temperature has no effect;
# JSON output is json_object only, never json_schema; after a tool call the turn's
# reasoning_content must be sent back; forcing a named tool is not documented there.
_DEEPSEEK_THINKING: dict[str, Any] = {
    "temperature": False, "json_schema": False, "tool_choice": False,
    "resend_reasoning": True, "reasoning": "thinking"}
# MiniMax M2 / M2.1 / M2.5 / M3 on api.minimax.io (/v1/chat/completions documents
# reasoning_split; litellm's map lists them with function calling and reasoning). Sources
# for the hosts that differ: Kilo-Org/kilocode#11653 (NVIDIA NIM answers 400 to the field),
# vellum-ai/vellum-assistant#34912 (Fireworks routes thinking to reasoning_content with it).
_MINIMAX_SPLIT: dict[str, Any] = {"json_schema": False, "tool_choice": False,
                                  "reasoning": "thinking",
                                  "extra_body": {"reasoning_split": True}}

# Rows: only the fields that differ from DEFAULT.
_BY_ID: dict[str, dict[str, Any]] = {
    "deepseek/deepseek-reasoner": _DEEPSEEK_THINKING,
    "deepseek/deepseek-chat": {"json_schema": False},
    "openai/gpt-4.1-mini": {"context_window": 1_047_576},
    "openai/gpt-4.1": {"context_window": 1_047_576},
    "openai/gpt-4o-mini": {"context_window": 128_000},
    "anthropic/claude-sonnet-4-5": {"json_schema": False, "reasoning": "thinking"},
    "anthropic/claude-opus-4-1": {"json_schema": False, "reasoning": "thinking"},
}

_BY_PATTERN: list[tuple[str, dict[str, Any]]] = [
    # OpenAI reasoning families: fixed temperature, effort knob.
    ("openai/o[0-9]*", {"temperature": False, "parallel_tool_calls": False,
                        "reasoning": "effort"}),
    ("openai/gpt-5*", {"temperature": False, "reasoning": "effort"}),
    ("azure/o[0-9]*", {"temperature": False, "parallel_tool_calls": False,
                       "reasoning": "effort"}),
    ("azure/gpt-5*", {"temperature": False, "reasoning": "effort"}),
    # Anthropic: structured output through a forced tool; extended thinking.
    ("anthropic/*", {"json_schema": False, "reasoning": "thinking"}),
    ("bedrock/*anthropic.claude*", {"json_schema": False, "reasoning": "thinking"}),
    ("gemini/gemini-2.5*", {"reasoning": "effort"}),
    # DeepSeek thinking variants (forward compatible: deepseek-v5-reasoner, ...).
    ("deepseek/*reason*", _DEEPSEEK_THINKING),
    # DeepSeek V4 and later "flash" / "pro" (deepseek-v4-flash, deepseek-v4.1-flash,
    # deepseek-v4-pro, deepseek-v5-pro, the aliases deepseek-flash / deepseek-pro): one id for
    # chat and thinking, thinking on by default, so they behave like the reasoner.
    ("deepseek/deepseek-v[4-9]*flash*", _DEEPSEEK_THINKING),
    ("deepseek/deepseek-v[4-9]*-pro*", _DEEPSEEK_THINKING),
    ("deepseek/deepseek-flash*", _DEEPSEEK_THINKING),
    ("deepseek/deepseek-pro", _DEEPSEEK_THINKING),
    ("deepseek/deepseek-pro-*", _DEEPSEEK_THINKING),
    ("deepseek/*", {"json_schema": False}),
    # MiniMax's own API: the M2 / M3 thinking models accept reasoning_split (their <think>
    # text then comes back in reasoning_content, out of the answer); older models do not
    # think and get no such field. MiniMax documents no tool_choice and no json_schema.
    ("minimax/minimax-m[2-9]*", _MINIMAX_SPLIT),
    ("minimax/*", {"json_schema": False, "tool_choice": False}),
    # MiniMax served by others: Fireworks honours reasoning_split; NVIDIA NIM rejects the
    # field with HTTP 400, so it is never sent there.
    ("fireworks_ai/*minimax-m[2-9]*", _MINIMAX_SPLIT),
    ("nvidia_nim/minimaxai/*", {"json_schema": False, "tool_choice": False}),
    ("zai/glm-*", {"json_schema": False, "tool_choice": False}),
    ("dashscope/qwq*", {"temperature": False, "json_schema": False, "tool_choice": False}),
    ("dashscope/*", {"json_schema": False}),
    ("xai/grok-*", {}),
    # Small local models that never call tools: the role calls the default tools itself.
    ("*smollm*", {"tools": False, "tool_choice": False, "parallel_tool_calls": False,
                  "context_window": 8192}),
    ("*gemma3-270m*", {"tools": False, "tool_choice": False, "parallel_tool_calls": False,
                       "context_window": 32768}),
    # Local servers: tools vary by model; tool_choice is commonly rejected or ignored.
    ("ollama/*deepseek-r1*", {"tools": False, "tool_choice": False}),
    ("ollama/*", {"tool_choice": False, "parallel_tool_calls": False}),
    ("ollama_chat/*", {"tool_choice": False, "parallel_tool_calls": False}),
    ("lm_studio/*", {"tool_choice": False}),
    ("hosted_vllm/*", {"json_schema": True}),
    ("openrouter/*", {"json_schema": False}),
]


def resolve(model: str) -> Capabilities:
    """Capabilities of ``model`` ("provider/model"): exact id, first matching pattern, default."""
    key = (model or "").strip()
    if key in _BY_ID:
        return replace(DEFAULT, **_BY_ID[key], source=f"id:{key}")
    lowered = key.lower()
    for pattern, row in _BY_PATTERN:
        if fnmatch.fnmatchcase(lowered, pattern.lower()):
            return replace(DEFAULT, **row, source=f"pattern:{pattern}")
    return DEFAULT
