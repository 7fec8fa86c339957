"""The answering agent: streamed completions with the ``search_kb`` tool only.

One loop: the model either calls ``search_kb`` (a tool round; at most
``AGENT_MAX_ITERATIONS`` of them) or answers. When the rounds are used up the
last call offers no tools, so the model must answer with what it has. Text
deltas go to ``on_token`` as they arrive; tool calls are assembled from their
streamed pieces. The SGR tool is never offered (DT-003).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from openai import OpenAI, Stream
from openai._streaming import SSEBytesDecoder, ServerSentEvent

from supportdesk.pipeline.answer.kb import TOOL_NAME, KbResult, kb_search, kb_tool, kb_tool_message
from supportdesk.pipeline.answer.stream import TailFilter
from supportdesk.waiting import model_wait
from supportdesk.llm import LLMStreamInterrupted
from supportdesk.pipeline.answer.echo_filter import AnalysisEchoFilter

TokenSink = Callable[[str], None]
Search = Callable[..., KbResult]


@dataclass
class AgentOutcome:
    text: str = ""
    follow_ups: list[str] = field(default_factory=list)
    rounds: int = 0  # tool rounds made
    llm_calls: int = 0
    hit_limit: bool = False  # the model still wanted to search when the rounds ran out
    searches: list[KbResult] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_wait_ms: float = 0.0  # time blocked on the model (request + waiting for chunks)
    first_token_ms: float | None = None  # from the agent's start to the first streamed token


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _Round:
    content: str = ""
    calls: dict[int, _Call] = field(default_factory=dict)
    finished: bool = False


def agent_run(
    *,
    client: OpenAI,
    messages: list[dict[str, Any]],
    turn_id: int,
    language: str,
    on_token: TokenSink,
    search: Search = kb_search,
    synthetic: str = "",
) -> AgentOutcome:
    """Run the tool rounds and the answer; ``synthetic`` is the turn's analysis message, which a
    model that copies it into its answer has removed from the stream (DT-004)."""
    outcome = AgentOutcome()
    started = time.monotonic()
    messages = list(messages)
    tool = kb_tool()
    max_rounds = max(0, settings.AGENT_MAX_ITERATIONS)
    while True:
        offer_tools = outcome.rounds < max_rounds
        tail = TailFilter()
        echo = AnalysisEchoFilter(synthetic)

        def emit(delta: str, tail: TailFilter = tail, echo: AnalysisEchoFilter = echo) -> None:  # this round's filters
            shown = tail.feed(echo.feed(delta))
            if shown:
                if outcome.first_token_ms is None:
                    outcome.first_token_ms = (time.monotonic() - started) * 1000
                on_token(shown)

        current = _stream_round(client, messages, [tool] if offer_tools else None, emit, outcome)
        rest = tail.feed(echo.finish()) + tail.finish()
        if rest:
            on_token(rest)
        if current.calls and offer_tools:
            outcome.rounds += 1
            messages.extend(_tool_round(current, turn_id=turn_id, language=language, search=search, outcome=outcome))
            continue
        # Every allowed round went to searching, so this last call had to answer without tools.
        outcome.hit_limit = not offer_tools and max_rounds > 0
        outcome.text = tail.answer
        outcome.follow_ups = tail.follow_ups
        return outcome


def _stream_round(
    client: OpenAI, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, emit: TokenSink,
    outcome: AgentOutcome,
) -> _Round:
    request: dict[str, Any] = {
        "model": settings.LLM_MODEL,
        "messages": messages,
        "temperature": settings.LLM_TEMPERATURE,
        "max_tokens": settings.LLM_MAX_TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        request["tools"] = tools
    outcome.llm_calls += 1
    current = _Round()
    for chunk in _timed(lambda: _completion_stream(client, request), outcome):
        if not isinstance(chunk, dict):
            continue  # not a chunk object: nothing of ours in it
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            outcome.prompt_tokens += usage.get("prompt_tokens") or 0
            outcome.completion_tokens += usage.get("completion_tokens") or 0
        choices = chunk.get("choices")
        if not choices or not isinstance(choices[0], dict):
            continue
        choice = choices[0]
        current.finished = current.finished or choice.get("finish_reason") is not None
        delta = choice.get("delta") or {}
        content = delta.get("content")
        if content:
            current.content += content
            emit(content)
        for piece in delta.get("tool_calls") or []:
            call = current.calls.setdefault(piece.get("index") or 0, _Call())
            call.id = piece.get("id") or call.id
            function = piece.get("function")
            if function:
                call.name = function.get("name") or call.name
                call.arguments += function.get("arguments") or ""
    if not current.finished:
        raise LLMStreamInterrupted(f"answer stream ended without a finish reason after {len(current.content)} chars")
    return current


def _completion_stream(client: OpenAI, request: dict[str, Any]) -> Stream[object]:
    """A streamed chat completion through the ``openai`` client (its retries, timeouts, errors and SSE
    decoding), each chunk as the JSON object the server sent.

    ``chat.completions.create`` would turn the request into typed params and every chunk into
    pydantic objects: ~11 % of a stage worker's CPU for 24 chunks, measured (``docs/benchmarks.md``);
    the answer reads four fields of each chunk.
    """
    # ``object``: the chunk type the client casts to, i.e. none (the parsed JSON as it is).
    return client.post("/chat/completions", body=request, cast_to=object, stream=True, stream_cls=ChunkStream)


# The blank line that ends a server-sent event (any of the three line ends).
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class _EventByEvent:
    """The client's SSE decoder, fed one event at a time: the bytes read beyond it wait here, so
    ``ready`` can tell that the next event has arrived already."""

    def __init__(self, decoder: SSEBytesDecoder) -> None:
        self._decoder = decoder
        self._pending = b""

    def ready(self) -> bool:
        """The next event is here, and it carries data (a comment such as a keep-alive yields no
        chunk: taking it would go on to wait for the network)."""
        end = _EVENT_END.search(self._pending)
        return end is not None and any(line.startswith(b"data") for line in self._pending[: end.start()].splitlines())

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[ServerSentEvent]:
        return self._decoder.iter_bytes(self._events(iterator))

    def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        return self._decoder.aiter_bytes(iterator)  # a sync stream never calls it

    def _events(self, iterator: Iterator[bytes]) -> Iterator[bytes]:
        for data in iterator:
            self._pending += data
            while (end := _EVENT_END.search(self._pending)) is not None:
                event, self._pending = self._pending[: end.end()], self._pending[end.end():]
                yield event
        event, self._pending = self._pending, b""
        if event:
            yield event


class ChunkStream(Stream[object]):
    """The ``openai`` client's stream that knows when its next chunk needs no wait: under a burst a
    stage comes back to its stream late and one read brings several chunks."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._events = _EventByEvent(self._decoder)
        self._decoder = self._events

    def next_ready(self) -> bool:
        """True when the next chunk was read already (with an earlier one): taking it is no wait."""
        return self._events.ready()


def _timed(make: Callable[[], Any], outcome: AgentOutcome) -> Iterator[Any]:
    """Iterate a stream, adding the time spent blocked on the model to ``llm_wait_ms``.

    The stage gives back its database connection and CPU slot for every wait (``supportdesk.waiting``),
    not for a chunk read already: a hand-off per chunk was ~4 % of a stage worker's CPU under a burst
    (issue 31), and the slot came back only after every other stage queued for it.
    """
    with model_wait(urgent=outcome.first_token_ms is None):  # the customer waits for the first token
        began = time.monotonic()
        stream = make()
        outcome.llm_wait_ms += (time.monotonic() - began) * 1000
    next_ready = stream.next_ready if isinstance(stream, ChunkStream) else None
    iterator = iter(stream)
    while True:
        if next_ready is not None and next_ready():
            try:
                chunk = next(iterator)
            except StopIteration:
                return
            yield chunk
            continue
        # Only the time blocked on the model counts as waiting on it: the wait for a CPU slot
        # afterwards (model_wait's exit) is the platform's.
        try:
            with model_wait(urgent=outcome.first_token_ms is None):
                began = time.monotonic()
                try:
                    chunk = next(iterator)
                finally:
                    outcome.llm_wait_ms += (time.monotonic() - began) * 1000
        except StopIteration:
            return
        yield chunk


def _tool_round(current: _Round, *, turn_id: int, language: str, search: Search, outcome: AgentOutcome) -> list[dict[str, Any]]:
    """The assistant's tool-call message and one tool message per call."""
    calls = [current.calls[i] for i in sorted(current.calls)]
    for number, call in enumerate(calls):
        call.id = call.id or f"call_{turn_id}_{outcome.rounds}_{number}"
    produced: list[dict[str, Any]] = [{
        "role": "assistant",
        "content": current.content or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ],
    }]
    for call in calls:
        produced.append({"role": "tool", "tool_call_id": call.id,
                         "content": _tool_answer(call, turn_id=turn_id, language=language, search=search, outcome=outcome)})
    return produced


def _tool_answer(call: _Call, *, turn_id: int, language: str, search: Search, outcome: AgentOutcome) -> str:
    if call.name != TOOL_NAME:
        return f"Unknown tool {call.name!r}: the only tool is {TOOL_NAME}."
    query = _query_of(call.arguments)
    if not query:
        return 'Invalid arguments: call search_kb with {"query": "<what to look up>"}.'
    result = search(query=query, turn_id=turn_id, language=language)
    outcome.searches.append(result)
    return kb_tool_message(result, language)


def _query_of(arguments: str) -> str:
    try:
        data = json.loads(arguments or "{}")
    except ValueError:
        return ""
    query = data.get("query") if isinstance(data, dict) else None
    return query.strip()[:2000] if isinstance(query, str) else ""
