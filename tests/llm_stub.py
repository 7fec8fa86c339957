"""A scripted OpenAI-compatible HTTP server on loopback (or on an address given).

Only the LLM and guard endpoints are stood in for in tests, and through real
HTTP, so the real ``openai`` client is exercised. The server records every
request it receives (path + JSON body) so tests can assert on the exact
messages the model was sent.

Chat completions answer, in order of precedence:
1. the next :class:`Reply` pushed with :meth:`ScriptedLLM.push` (FIFO);
2. otherwise a default: the ``plan_args`` as a tool call when a tool is forced
   or as JSON content when a ``response_format`` is asked for, and
   ``answer_text`` (streamed word by word when ``stream`` is set).

Other paths can be scripted with :meth:`ScriptedLLM.route`.
"""

from __future__ import annotations

import hashlib
import json
import math
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_PLAN_ARGS: dict[str, Any] = {
    "spam_score": 0.05,
    "user_intent": "The customer asks how to reset their password.",
    "subqueries": ["reset password"],
    "intent_confidence": 0.9,
    "action": "normal",
}
DEFAULT_ANSWER = "You can reset your password from the login page."


@dataclass
class Reply:
    """One scripted answer to a chat-completions request."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None  # [{"name": ..., "arguments": "<json string>"}]
    status: int = 200  # non-200: an error body with this status
    delay: float = 0.0  # seconds before answering (a slow provider)
    raw_body: str | None = None  # sent verbatim (malformed output)
    drop: bool = False  # close the connection without answering
    chunk_delay: float = 0.0  # seconds between streamed chunks
    cut_after: int | None = None  # streaming: drop the connection after this many chunks
    # Per-token logprobs as llama.cpp's server returns them on chat completions:
    # [{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}, ...]
    logprobs: list[dict[str, Any]] | None = None


RouteHandler = Callable[[dict[str, Any]], tuple[int, Any]]


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    first_chunk_at: float | None = None  # streamed replies: when the first content chunk was sent


class ScriptedLLM:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host  # the address it listens on: loopback, or one that other hosts reach
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self._routes: dict[str, RouteHandler] = {}
        self.requests: list[Recorded] = []
        self.plan_args: dict[str, Any] = dict(DEFAULT_PLAN_ARGS)
        self.answer_text = DEFAULT_ANSWER
        self.plan_delay = 0.0  # default replies: seconds before a non-streamed reply (a real model plans for seconds)
        self.chunk_delay = 0.0  # default replies: seconds between streamed chunks
        self.in_flight = 0  # chat completions being answered now
        self.most_in_flight = 0  # the most at once since the last reset
        self.embedding_dim = 384
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> None:
        stub = self

        class Handler(_Handler):
            owner = stub

        server = _QuietServer((self.host, self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.close_open_connections()  # a down endpoint drops kept-alive clients too
            self._server = None

    @contextmanager
    def down(self) -> Iterator[None]:
        """The endpoint is down (connection refused) inside the block, back afterwards."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self._routes.clear()
            self.requests.clear()
            self.plan_args = dict(DEFAULT_PLAN_ARGS)
            self.answer_text = DEFAULT_ANSWER
            self.plan_delay = self.chunk_delay = 0.0
            self.most_in_flight = self.in_flight

    def _chat_started(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def _chat_ended(self) -> None:
        with self._lock:
            self.in_flight -= 1

    # --- scripting ---------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def route(self, path: str, handler: RouteHandler) -> None:
        """Answer POSTs to ``path`` (e.g. ``/v1/moderations``) with ``handler(body) -> (status, json)``."""
        with self._lock:
            self._routes[path] = handler

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    # --- internals -------------------------------------------------------------------
    def _record(self, path: str, body: dict[str, Any]) -> Recorded:
        recorded = Recorded(path=path, body=body)
        with self._lock:
            self.requests.append(recorded)
        return recorded

    def _next_reply(self) -> Reply | None:
        with self._lock:
            return self._replies.popleft() if self._replies else None

    def _route_for(self, path: str) -> RouteHandler | None:
        with self._lock:
            return self._routes.get(path)

    def default_reply(self, body: dict[str, Any]) -> Reply:
        tool_choice = body.get("tool_choice")
        if body.get("tools") and tool_choice not in (None, "auto", "none"):
            name = body["tools"][0]["function"]["name"]
            if isinstance(tool_choice, dict):
                name = tool_choice["function"]["name"]
            return Reply(tool_calls=[{"name": name, "arguments": json.dumps(self.plan_args)}], delay=self.plan_delay)
        if body.get("response_format", {}).get("type") in ("json_schema", "json_object"):
            return Reply(content=json.dumps(self.plan_args), delay=self.plan_delay)
        if body.get("stream"):
            return Reply(content=self.answer_text, chunk_delay=self.chunk_delay)
        return Reply(content=self.answer_text, delay=self.plan_delay)


class _QuietServer(ThreadingHTTPServer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.discard(request)

    def close_open_connections(self) -> None:
        with self._open_lock:
            for connection in list(self._open):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test) closes its end first: that is expected here.
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def fake_embedding(text: str, dim: int) -> list[float]:
    """Deterministic unit vector derived from the text (same text, same vector)."""
    values = []
    counter = 0
    while len(values) < dim:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((b - 127.5) / 127.5 for b in digest)
        counter += 1
    values = values[:dim]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


class _Handler(BaseHTTPRequestHandler):
    # TCP_NODELAY, as real model servers set it (uvicorn, Go's net/http): with Nagle's algorithm a
    # streamed chunk written right after the headers waits for their delayed ACK, up to 40 ms.
    disable_nagle_algorithm = True
    owner: ScriptedLLM
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode(errors="replace")}
        path = self.path.split("?")[0]
        self._recorded = self.owner._record(path, body)
        handler = self.owner._route_for(path)
        if handler is not None:
            status, payload = handler(body)
            if isinstance(payload, str):
                self._raw(status, payload)
            else:
                self._json(status, payload)
        elif path.endswith("/chat/completions"):
            self._chat(body)
        elif path.endswith("/embeddings"):
            self._embeddings(body)
        elif path.endswith("/moderations"):
            self._json(200, {"id": "modr-1", "model": "scripted", "results": [{"flagged": False, "categories": {}, "category_scores": {}}]})
        else:
            self._json(404, {"error": {"message": f"no scripted route for {path}"}})

    def _chat(self, body: dict[str, Any]) -> None:
        self.owner._chat_started()
        try:
            self._chat_answer(body)
        finally:
            self.owner._chat_ended()

    def _chat_answer(self, body: dict[str, Any]) -> None:
        reply = self.owner._next_reply() or self.owner.default_reply(body)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.drop:
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if reply.raw_body is not None:
            self._raw(reply.status, reply.raw_body)
            return
        if reply.status != 200:
            self._json(reply.status, {"error": {"message": "scripted failure", "type": "server_error"}})
            return
        if body.get("stream"):
            self._stream(body, reply)
        else:
            self._json(200, self._completion(body, reply))

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        finish = "stop"
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                 "function": {"name": call["name"], "arguments": call["arguments"]}}
                for call in reply.tool_calls
            ]
            finish = "tool_calls"
        prompt_tokens = _count_tokens(json.dumps(body.get("messages", [])))
        completion_tokens = _count_tokens(reply.content or json.dumps(reply.tool_calls or ""))
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": _logprobs_body(reply.logprobs)}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _stream(self, body: dict[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:8]}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body.get("model", "scripted")}
        pieces = _split_tokens(reply.content or "")
        try:
            for i, piece in enumerate(pieces):
                if reply.cut_after is not None and i >= reply.cut_after:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                delta = {"content": piece} if i else {"role": "assistant", "content": piece}
                self._sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                if i == 0:
                    self._recorded.first_chunk_at = time.monotonic()
                if reply.chunk_delay:
                    time.sleep(reply.chunk_delay)
            finish = "stop"
            if reply.tool_calls:
                self._stream_tool_calls(base, reply.tool_calls, reply.chunk_delay)
                finish = "tool_calls"
            self._sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            if body.get("stream_options", {}).get("include_usage"):
                prompt_tokens = _count_tokens(json.dumps(body.get("messages", [])))
                self._sse({**base, "choices": [], "usage": {
                    "prompt_tokens": prompt_tokens, "completion_tokens": len(pieces),
                    "total_tokens": prompt_tokens + len(pieces)}})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _stream_tool_calls(self, base: dict[str, Any], calls: list[dict[str, Any]], chunk_delay: float) -> None:
        """Streamed tool calls as OpenAI sends them: id and name first, then the arguments in pieces."""
        for index, call in enumerate(calls):
            head = {"index": index, "id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                    "function": {"name": call["name"], "arguments": ""}}
            self._sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [head]},
                                            "finish_reason": None}]})
            arguments = call["arguments"]
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                self._sse({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": index, "function": {"arguments": piece}}]}, "finish_reason": None}]})
                if chunk_delay:
                    time.sleep(chunk_delay)

    def _embeddings(self, body: dict[str, Any]) -> None:
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        dim = int(body.get("dimensions") or self.owner.embedding_dim)
        data = [{"object": "embedding", "index": i, "embedding": fake_embedding(str(text), dim)}
                for i, text in enumerate(inputs)]
        tokens = sum(_count_tokens(str(t)) for t in inputs)
        self._json(200, {"object": "list", "data": data, "model": body.get("model", "scripted"),
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _sse(self, payload: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
        self.wfile.flush()

    def _json(self, status: int, payload: Any) -> None:
        self._raw(status, json.dumps(payload), content_type="application/json")

    def _raw(self, status: int, text: str, content_type: str = "application/json") -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _logprobs_body(positions: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    if positions is None:
        return None
    return {"content": [
        {"token": p["token"], "logprob": p["logprob"], "bytes": list(p["token"].encode()),
         "top_logprobs": [{"token": t["token"], "logprob": t["logprob"], "bytes": list(t["token"].encode())}
                          for t in p.get("top_logprobs", [])]}
        for p in positions
    ]}


def logprobs_first_token(probabilities: dict[str, float]) -> list[dict[str, Any]]:
    """One answer position whose top tokens have these probabilities (the most likely is the token)."""
    top = sorted(probabilities.items(), key=lambda item: -item[1])
    return [{"token": top[0][0], "logprob": math.log(top[0][1]),
             "top_logprobs": [{"token": token, "logprob": math.log(p)} for token, p in top]}]


def _split_tokens(text: str) -> list[str]:
    """Word-ish pieces that concatenate back to ``text`` exactly."""
    pieces: list[str] = []
    current = ""
    for ch in text:
        if ch == " " and current:
            pieces.append(current)
            current = ""
        current += ch
    if current:
        pieces.append(current)
    return pieces


def _count_tokens(text: str) -> int:
    return max(1, len(text) // 4)
