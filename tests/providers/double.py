"""A local double of the OpenAI and Anthropic HTTP APIs, for the real ``langchain-openai`` / ``langchain-anthropic``
clients pointed at it with ``base_url`` (127.0.0.1 only; no network, no key).

It speaks what the clients send and parse, following the providers' published formats:

- OpenAI Chat Completions, ``POST /v1/chat/completions``: a ``chat.completion`` object, or with ``"stream": true``
  server-sent ``chat.completion.chunk`` events ending in ``data: [DONE]`` (usage in a last chunk when
  ``stream_options.include_usage``); tool calls, ``refusal``, usage with ``prompt_tokens_details.cached_tokens`` and
  ``completion_tokens_details.reasoning_tokens``.
- OpenAI Responses, ``POST /v1/responses``: a ``response`` object with ``message`` / ``function_call`` output items,
  or its event stream (``response.created`` ... ``response.completed``).
- Anthropic Messages, ``POST /v1/messages``: a ``message`` with ``text`` / ``tool_use`` blocks, or its event stream
  (``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``); usage with
  ``cache_read_input_tokens`` / ``cache_creation_input_tokens``; ``stop_reason: "refusal"``.
- Errors: any status with the provider's error body and headers (``retry-after``), e.g. 429, 529, 500, 400.

Each test scripts the replies (:class:`Reply`, served in order, whatever the endpoint) and reads what the provider
received in :attr:`ProviderDouble.requests` (path, headers, JSON body).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from typing import Any

_ids = count(1)


@dataclass
class ToolCallReply:
    name: str
    args: dict[str, Any]
    id: str = field(default_factory=lambda: f"call_{next(_ids)}")


@dataclass
class Reply:
    """One scripted answer: text, tool calls, usage; or an error (``status`` >= 400)."""

    text: str = ""
    tool_calls: list[ToolCallReply] = field(default_factory=list)
    input_tokens: int = 11
    output_tokens: int = 7
    cached_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    refusal: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error_type: str = "rate_limit_error"
    chunk_size: int = 3
    """Characters per streamed text delta (a value split across tokens is the point of some tests)."""


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class _Server(ThreadingHTTPServer):
    """The double's HTTP server: a client that hangs up mid-request (a cancelled or abandoned call, which some tests
    make on purpose) is no error of the server's, so it prints no traceback into the test output."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class ProviderDouble:
    """The server. ``script(*replies)`` queues answers; ``requests`` records what arrived."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._replies: list[Reply] = []
        self._lock = threading.Lock()
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                double._handle(self, body)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ProviderDouble:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, *replies: Reply | str) -> None:
        with self._lock:
            self.requests.clear()
            self._replies = [Reply(text=r) if isinstance(r, str) else r for r in replies]

    def bodies(self, path: str | None = None) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if path is None or r.path.endswith(path)]

    # -- serving -----------------------------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        path = handler.path.split("?")[0]
        with self._lock:
            self.requests.append(Received(path, {k.lower(): v for k, v in handler.headers.items()}, body))
            reply = self._replies.pop(0) if self._replies else Reply(status=500, error_type="script_exhausted")
        api = "anthropic" if path.endswith("/messages") else "responses" if path.endswith("/responses") else "chat"
        if reply.status >= 400:
            return _send_json(handler, reply.status, _error_body(api, reply), reply.headers)
        model = str(body.get("model", "model"))
        if not body.get("stream"):
            payload = {"chat": _chat_completion, "responses": _response, "anthropic": _message}[api](reply, model)
            return _send_json(handler, 200, payload, reply.headers)
        events = {"chat": _chat_stream, "responses": _responses_stream, "anthropic": _anthropic_stream}[api]
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        _send_events(handler, events(reply, model, include_usage), api != "chat")


def _send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str]) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(data)


def _send_events(handler: BaseHTTPRequestHandler, events: Iterator[tuple[str | None, Any]], named: bool) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("transfer-encoding", "chunked")
    handler.end_headers()
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        frame = (f"event: {name}\n" if named and name else "") + f"data: {text}\n\n"
        chunk = frame.encode()
        handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        handler.wfile.flush()
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or []


def _error_body(api: str, reply: Reply) -> dict[str, Any]:
    message = f"scripted {reply.status} ({reply.error_type})"
    if api == "anthropic":
        return {"type": "error", "error": {"type": reply.error_type, "message": message}}
    return {"error": {"message": message, "type": reply.error_type, "param": None, "code": reply.error_type}}


# -- OpenAI Chat Completions ----------------------------------------------------------------------------------
def _chat_usage(reply: Reply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    }


def _chat_completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": reply.refusal}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.args)}}
            for c in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": _chat_usage(reply), "system_fingerprint": "fp_double",
    }


def _chat_stream(reply: Reply, model: str, include_usage: bool) -> Iterator[tuple[str | None, Any]]:
    base = {"id": f"chatcmpl-{next(_ids)}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "system_fingerprint": "fp_double"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if reply.refusal:
        for piece in _pieces(reply.refusal, reply.chunk_size):
            yield chunk({"refusal": piece})
    for piece in _pieces(reply.text, reply.chunk_size):
        yield chunk({"content": piece})
    for index, call in enumerate(reply.tool_calls):
        yield chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]})
        for piece in _pieces(json.dumps(call.args), reply.chunk_size):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
    if include_usage:
        yield None, {**base, "choices": [], "usage": _chat_usage(reply)}
    yield None, "[DONE]"


# -- OpenAI Responses -------------------------------------------------------------------------------------------
def _responses_usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
        "input_tokens_details": {"cached_tokens": reply.cached_tokens},
        "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
    }


def _responses_output(reply: Reply) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if reply.text or reply.refusal:
        content = (
            [{"type": "refusal", "refusal": reply.refusal}] if reply.refusal
            else [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]
        )
        output.append({"type": "message", "id": f"msg_{next(_ids)}", "status": "completed", "role": "assistant",
                       "content": content})
    for call in reply.tool_calls:
        output.append({"type": "function_call", "id": f"fc_{next(_ids)}", "call_id": call.id, "name": call.name,
                       "arguments": json.dumps(call.args), "status": "completed"})
    return output


def _response(reply: Reply, model: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": f"resp_{next(_ids)}", "object": "response", "created_at": int(time.time()), "status": status,
        "model": model, "output": _responses_output(reply) if status == "completed" else [],
        "usage": _responses_usage(reply) if status == "completed" else None,
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}},
        "error": None, "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": 1.0,
        "top_p": 1.0, "max_output_tokens": None, "previous_response_id": None, "reasoning": None,
        "truncation": "disabled", "user": None,
    }


def _responses_stream(reply: Reply, model: str, include_usage: bool) -> Iterator[tuple[str | None, Any]]:
    seq = count()
    started = _response(reply, model, status="in_progress")
    yield "response.created", {"type": "response.created", "sequence_number": next(seq), "response": started}
    final = _response(reply, model)
    final["id"] = started["id"]
    for index, item in enumerate(final["output"]):
        empty = {**item, "status": "in_progress"}
        if item["type"] == "message":
            empty["content"] = []
        if item["type"] == "function_call":
            empty["arguments"] = ""
        yield "response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                             "output_index": index, "item": empty}
        if item["type"] == "message" and item["content"][0]["type"] == "output_text":
            part = {"type": "output_text", "text": "", "annotations": []}
            yield "response.content_part.added", {"type": "response.content_part.added", "item_id": item["id"],
                                                  "output_index": index, "content_index": 0, "part": part,
                                                  "sequence_number": next(seq)}
            for piece in _pieces(reply.text, reply.chunk_size):
                yield "response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                     "output_index": index, "content_index": 0, "delta": piece,
                                                     "logprobs": [], "sequence_number": next(seq)}
            yield "response.output_text.done", {"type": "response.output_text.done", "item_id": item["id"],
                                                "output_index": index, "content_index": 0, "text": reply.text,
                                                "logprobs": [], "sequence_number": next(seq)}
        if item["type"] == "function_call":
            yield "response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": index,
                "delta": item["arguments"], "sequence_number": next(seq)}
        yield "response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                            "output_index": index, "item": item}
    yield "response.completed", {"type": "response.completed", "sequence_number": next(seq), "response": final}


# -- Anthropic Messages -----------------------------------------------------------------------------------------
def _anthropic_usage(reply: Reply) -> dict[str, Any]:
    return {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
            "cache_read_input_tokens": reply.cached_tokens,
            "cache_creation_input_tokens": reply.cache_creation_tokens}


def _stop_reason(reply: Reply) -> str:
    return "refusal" if reply.refusal else "tool_use" if reply.tool_calls else "end_turn"


def _message(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text or reply.refusal:
        content.append({"type": "text", "text": reply.text or reply.refusal or ""})
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in reply.tool_calls]
    return {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": _stop_reason(reply), "stop_sequence": None, "usage": _anthropic_usage(reply)}


def _anthropic_stream(reply: Reply, model: str, include_usage: bool) -> Iterator[tuple[str | None, Any]]:
    start = _message(Reply(input_tokens=reply.input_tokens, output_tokens=1, cached_tokens=reply.cached_tokens,
                           cache_creation_tokens=reply.cache_creation_tokens), model)
    start["stop_reason"] = None
    yield "message_start", {"type": "message_start", "message": start}
    index = 0
    text = reply.text or reply.refusal or ""
    if text:
        yield "content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}
        for piece in _pieces(text, reply.chunk_size):
            yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    for offset, call in enumerate(reply.tool_calls):
        i = index + offset
        yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": {
            "type": "tool_use", "id": call.id, "name": call.name, "input": {}}}
        for piece in _pieces(json.dumps(call.args), reply.chunk_size):
            yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                          "delta": {"type": "input_json_delta", "partial_json": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
                            "usage": _anthropic_usage(reply)}  # cumulative, as the API sends it
    yield "message_stop", {"type": "message_stop"}
