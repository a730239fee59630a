"""A small OpenAI-compatible chat server for tests: the far side of the network, faked.

litellm talks to it over real HTTP (``openai/<name>`` with ``base_url=server.url``), so the
whole client path - request building, the SDK, error mapping, retries - is exercised.

Scripting: ``server.push(reply, ...)`` queues replies, played one per request in order. When
the queue is empty the server is "smart": it answers any request plausibly - tool calls for
every offered tool on the first turn (arguments from the prompt's Ticker / Trade date lines),
a valid object when ``response_format`` asks for a json_schema or ``tool_choice`` forces a
function, and plain text otherwise. Every request body is kept in ``server.requests``.

Reply builders: ``text()``, ``tool_calls()``, ``json_reply()``, ``error()``, ``hang()``;
``slow()`` streams a text a word at a time with a gap between chunks, ``stall()`` streams a
few words and then goes silent.

Streaming: a request with ``"stream": true`` is answered the way OpenAI-compatible servers
do, as server-sent events (``data: {chat.completion.chunk}`` lines, a usage chunk when
``stream_options.include_usage`` asks for it, then ``data: [DONE]``).

Server facts: ``server.props`` (a llama.cpp ``/props`` body) and ``server.models`` (names for
``/v1/models``) are served on GET when set, and ``server.chars_per_token`` answers llama.cpp's
``POST /tokenize`` with that many tokens; otherwise those paths are 404, as on a server that
does not have them.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

_PATHS = ("/v1/chat/completions", "/chat/completions")


def text(content: str) -> dict:
    return {"kind": "message", "content": content, "tool_calls": []}


def tool_calls(*calls: tuple[str, dict], content: str | None = None,
               reasoning: str | None = None) -> dict:
    """A reply asking for tools: ``tool_calls(("get_news", {"ticker": "NVDA"}), ...)``;
    ``reasoning`` is returned as ``reasoning_content`` (thinking models)."""
    return {"kind": "message", "content": content, "tool_calls": list(calls),
            "reasoning": reasoning}


def json_reply(obj: Any) -> dict:
    """A reply whose content is ``obj`` serialised (what a json_schema request returns)."""
    return text(json.dumps(obj))


def error(status: int, message: str = "scripted failure", headers: dict | None = None) -> dict:
    return {"kind": "error", "status": status, "message": message, "headers": headers or {}}


def hang(seconds: float = 2.0) -> dict:
    """Sleep before answering (plausibly), so a client with a shorter timeout gives up."""
    return {"kind": "hang", "seconds": seconds}


def slow(content: str, gap_s: float) -> dict:
    """Stream ``content`` a word per chunk, ``gap_s`` apart (a slow but steady model)."""
    return {"kind": "message", "content": content, "tool_calls": [], "gap_s": gap_s}


def stall(content: str, after_words: int, seconds: float) -> dict:
    """Stream the first ``after_words`` words of ``content``, then send nothing for
    ``seconds`` (a server that stopped producing tokens)."""
    return {"kind": "message", "content": content, "tool_calls": [], "stall_after": after_words,
            "stall_s": seconds}


def example_for(schema: dict, defs: dict | None = None) -> Any:
    """A value that validates against a (simple) JSON schema; prefers "Hold" in enums."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return example_for(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "enum" in schema:
        return "Hold" if "Hold" in schema["enum"] else schema["enum"][0]
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"] or schema["anyOf"]
        return example_for(options[0], defs)
    kind = schema.get("type", "string")
    if kind == "object":
        return {k: example_for(v, defs) for k, v in schema.get("properties", {}).items()}
    return {"string": "fake text from the test server", "number": 1.5, "integer": 1,
            "boolean": True, "array": [], "null": None}.get(kind, "x")


def _prompt_value(body: dict, label: str, default: str) -> str:
    for message in body.get("messages", []):
        match = re.search(rf"(?im)^{label}:\s*(\S+)", str(message.get("content") or ""))
        if match:
            return match.group(1)
    return default


def _smart_arguments(parameters: dict, body: dict) -> dict:
    ticker = _prompt_value(body, "Ticker", "SPY")
    day = _prompt_value(body, "Trade date", "2024-05-10")
    args = {}
    for name, spec in (parameters.get("properties") or {}).items():
        if name in ("symbol", "ticker"):
            args[name] = ticker
        elif "date" in name:
            args[name] = day
        elif name == "indicator":
            args[name] = "rsi"
        elif name in (parameters.get("required") or []):
            args[name] = example_for(spec or {})
    return args


def smart_reply(body: dict) -> dict:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return json_reply(example_for(fmt["json_schema"]["schema"]))
    tools = {t["function"]["name"]: t["function"] for t in body.get("tools") or []}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("function", {}).get("name") in tools:
        fn = tools[choice["function"]["name"]]
        return tool_calls((fn["name"], example_for(fn.get("parameters") or {})))
    first_turn = not any(m.get("role") == "tool" for m in body.get("messages", []))
    if tools and first_turn:
        return tool_calls(*[(name, _smart_arguments(fn.get("parameters") or {}, body))
                            if not name.startswith("submit_")
                            else (name, example_for(fn.get("parameters") or {}))
                            for name, fn in tools.items()])
    return text("Fake model answer from the test server.\nRating: Hold\n"
                "FINAL TRANSACTION PROPOSAL: **HOLD**")


class FakeOpenAIServer:
    def __init__(self) -> None:
        self.script: deque[dict] = deque()
        self.requests: list[dict] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []  # lower-case names
        self.props: dict | None = None  # GET /props (llama.cpp), when set
        self.models: list[str] | None = None  # GET /v1/models, when set
        self.chars_per_token: float | None = None  # POST /tokenize (llama.cpp), when set
        self.active = 0  # requests being handled right now
        self.peak_active = 0  # the most handled at once (checks client-side concurrency caps)
        self._lock = threading.Lock()
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def push(self, *replies: dict) -> FakeOpenAIServer:
        with self._lock:
            self.script.extend(replies)
        return self

    def reset(self) -> None:
        with self._lock:
            self.script.clear()
            self.requests.clear()
            self.paths.clear()
            self.headers.clear()
            self.peak_active = 0

    def _next(self, body: dict, path: str, headers: dict) -> tuple[int, dict]:
        with self._lock:
            self.requests.append(body)
            self.paths.append(path)
            self.headers.append(headers)
            self._counter += 1
            return self._counter, self._choose(body)

    def _choose(self, body: dict) -> dict:
        """The reply to ``body`` (called under the lock): the script first, else a smart one."""
        return self.script.popleft() if self.script else smart_reply(body)

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                """Keep test output clean."""

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, str(value))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                path = self.path.split("?")[0]
                if path == "/props" and server.props is not None:
                    self._send(200, server.props)
                elif path in ("/v1/models", "/models") and server.models is not None:
                    self._send(200, {"object": "list", "data": [
                        {"id": name, "object": "model", "owned_by": "test"}
                        for name in server.models]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _stream(self, number: int, body: dict, reply: dict) -> None:
                """The reply as server-sent events, one word of content per chunk."""
                whole = server._completion(number, body, reply)
                message = whole["choices"][0]["message"]
                base = {"id": whole["id"], "object": "chat.completion.chunk",
                        "created": whole["created"], "model": whole["model"]}
                words = re.findall(r"\S+\s*", message.get("content") or "")
                deltas: list[dict] = [{"role": "assistant", "content": ""}]
                if message.get("reasoning_content"):
                    deltas.append({"reasoning_content": message["reasoning_content"]})
                deltas += [{"content": w} for w in words]
                if message.get("tool_calls"):
                    deltas.append({"tool_calls": [dict(c, index=i) for i, c in
                                                  enumerate(message["tool_calls"])]})
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    for i, delta in enumerate(deltas):
                        if i > 0 and reply.get("gap_s"):
                            time.sleep(reply["gap_s"])
                        if reply.get("stall_after") is not None and i == reply["stall_after"] + 1:
                            time.sleep(reply["stall_s"])
                        chunk = dict(base, choices=[{"index": 0, "delta": delta,
                                                     "finish_reason": None}])
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    finish = whole["choices"][0]["finish_reason"]
                    last = dict(base, choices=[{"index": 0, "delta": {},
                                                "finish_reason": finish}])
                    self.wfile.write(f"data: {json.dumps(last)}\n\n".encode())
                    if (body.get("stream_options") or {}).get("include_usage"):
                        usage = dict(base, choices=[], usage=whole["usage"])
                        self.wfile.write(f"data: {json.dumps(usage)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                if self.path.split("?")[0] == "/tokenize" and server.chars_per_token:
                    content = str(json.loads(raw or b"{}").get("content") or "")
                    count = max(1, round(len(content) / server.chars_per_token))
                    self._send(200, {"tokens": list(range(count))})
                    return
                if self.path.split("?")[0] not in _PATHS:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                body = json.loads(raw or b"{}")
                number, reply = server._next(body, self.path, {k.lower(): v for k, v in self.headers.items()})
                with server._lock:
                    server.active += 1
                    server.peak_active = max(server.peak_active, server.active)
                try:
                    self._answer(number, body, reply)
                finally:
                    with server._lock:
                        server.active -= 1

            def _answer(self, number: int, body: dict, reply: dict) -> None:
                if reply["kind"] == "hang":
                    time.sleep(reply["seconds"])
                    reply = smart_reply(body)
                if reply["kind"] == "error":
                    self._send(reply["status"], {"error": {
                        "message": reply["message"], "type": "scripted_error",
                        "code": str(reply["status"])}}, reply["headers"])
                    return
                if body.get("stream"):
                    self._stream(number, body, reply)
                    return
                self._send(200, server._completion(number, body, reply))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True,
                         name="fake-openai").start()
        return self

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @staticmethod
    def _completion(number: int, body: dict, reply: dict) -> dict:
        calls = [{"id": f"call_fake_{number}_{i}", "type": "function",
                  "function": {"name": name, "arguments": json.dumps(args)}}
                 for i, (name, args) in enumerate(reply["tool_calls"])]
        message: dict[str, Any] = {"role": "assistant", "content": reply["content"]}
        if calls:
            message["tool_calls"] = calls
        if reply.get("reasoning"):
            message["reasoning_content"] = reply["reasoning"]
        prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
        completion = len(reply["content"] or "") + sum(len(c["function"]["arguments"])
                                                        for c in calls)
        return {"id": f"chatcmpl-fake-{number}", "object": "chat.completion",
                "created": int(time.time()), "model": body.get("model", "test-model"),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": max(1, prompt // 4),
                          "completion_tokens": max(1, completion // 4),
                          "total_tokens": max(1, prompt // 4) + max(1, completion // 4)}}


@pytest.fixture
def fake_openai():
    """A started FakeOpenAIServer on an ephemeral 127.0.0.1 port; stopped after the test."""
    with FakeOpenAIServer() as server:
        yield server
