"""A whole customer turn over the websocket, through a real Celery worker and Redis."""

from __future__ import annotations

import json
import time

import pytest

from supportdesk.models import Message, Turn, TurnEvent
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create
from tests.conftest import wait_for_turn
from tests.llm_stub import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _path(conv: object, token: str, last_seq: int | None = None) -> str:
    path = f"/ws/conversations/{conv.public_id}/?token={token}"
    return path if last_seq is None else f"{path}&last_seq={last_seq}"


def test_full_turn_streams_events_from_all_three_stages(llm, celery_worker, ws_client):
    llm.answer_text = "Open Settings, then Security, then Reset password."
    created = conversation_create(language="en")
    client = ws_client(_path(created.conversation, created.access_token))
    assert client.connect()[0]

    client.send_json({"type": "message", "text": "How do I reset my password?"})
    frames = client.receive_until(lambda f: f["type"] == "done", timeout=60)

    types = [f["type"] for f in frames]
    assert types[0] == "accepted"
    statuses = [f["payload"]["status"] for f in frames if f["type"] == "status"]
    assert statuses == ["queued", "guarding", "planning", "answering"]
    plan = next(f for f in frames if f["type"] == "plan")
    assert "reset their password" in plan["payload"]["text"]
    tokens = "".join(f["payload"]["text"] for f in frames if f["type"] == "token")
    assert tokens == llm.answer_text
    assert len([f for f in frames if f["type"] == "token"]) > 1  # streamed, not one blob
    answer = next(f for f in frames if f["type"] == "answer")
    assert answer["payload"]["text"] == llm.answer_text
    assert frames[-1]["payload"]["status"] == "done"

    # Sequence numbers are strictly increasing and match what was stored.
    seqs = [f["seq"] for f in frames if f["seq"] is not None]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    stored = list(TurnEvent.objects.filter(conversation=created.conversation).values_list("seq", flat=True))
    assert stored == seqs

    turn = Turn.objects.get(conversation=created.conversation)
    assert turn.status == Turn.Status.DONE
    assert turn.answer_message.text == llm.answer_text
    assert list(Message.objects.filter(conversation=created.conversation).values_list("role", flat=True)) == [
        "user", "assistant",
    ]
    # One planning call (forced tool) and one streamed answer call reached the real HTTP endpoint.
    chats = llm.chat_requests()
    assert len(chats) == 2
    assert chats[0]["tool_choice"] == {"type": "function", "function": {"name": "analyse_user_request"}}
    assert chats[1]["stream"] is True
    assert chats[1]["messages"][-2] == {"role": "user", "content": "How do I reset my password?"}
    assert chats[1]["messages"][-1]["role"] == "assistant"

    # Each stage logged one structured line with the turn id, outcome, latency and tokens.
    def stage_lines() -> list[dict]:
        return [json.loads(line.split("] ", 1)[1]) for line in celery_worker.log_path.read_text().splitlines()
                if '"event": "turn_stage"' in line and f'"turn_id": {turn.pk},' in line]

    # The answer stage logs right after it commits `done`, so its line may trail the event.
    deadline = time.monotonic() + 10
    while len(logged := stage_lines()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [entry["stage"] for entry in logged] == ["guard", "sgr", "answer"]
    assert [entry["outcome"] for entry in logged] == ["pass", "normal", "done"]
    assert all(entry["latency_ms"] >= 0 for entry in logged)
    assert logged[1]["tokens"]["prompt"] > 0 and logged[2]["tokens"]["completion"] > 0
    assert chats[1]["messages"][-1]["content"].startswith("## Analysis")
    # The answering agent is offered search_kb only, never the SGR tool (DT-003).
    assert [t["function"]["name"] for t in chats[1]["tools"]] == ["search_kb"]


def test_reconnect_with_last_seq_replays_only_missed_events(llm, celery_worker, ws_client):
    created = conversation_create(language="en")
    first = ws_client(_path(created.conversation, created.access_token))
    assert first.connect()[0]
    first.send_json({"type": "message", "text": "Where is my invoice?"})
    frames = first.receive_until(lambda f: f["type"] == "done", timeout=60)
    first.close()
    seqs = [f["seq"] for f in frames if f["seq"] is not None]
    cut = seqs[2]

    second = ws_client(_path(created.conversation, created.access_token, last_seq=cut))
    assert second.connect()[0]
    replay = second.receive_until(lambda f: f["type"] == "done", timeout=10)
    assert [f["seq"] for f in replay] == [s for s in seqs if s > cut]


def test_wrong_or_missing_token_is_refused(ws_client):
    created = conversation_create(language="en")
    wrong = ws_client(_path(created.conversation, "not-the-token"))
    connected, code = wrong.connect()
    assert not connected and code == 4403
    missing = ws_client(f"/ws/conversations/{created.conversation.public_id}/")
    assert missing.connect() == (False, 4403)
    other = conversation_create(language="en")
    # Another conversation's valid token does not open this one.
    crossed = ws_client(_path(created.conversation, other.access_token))
    assert crossed.connect()[0] is False


def test_foreign_origin_is_refused(ws_client):
    created = conversation_create(language="en")
    client = ws_client(_path(created.conversation, created.access_token), origin=b"http://evil.example")
    assert client.connect()[0] is False


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("{not json", "bad_frame"),
        (json.dumps(["message", "hi"]), "bad_frame"),
        (json.dumps({"type": "nonsense"}), "bad_frame"),
        (json.dumps({"type": "message", "text": "   "}), "message_empty"),
        (json.dumps({"type": "message", "text": 42}), "message_empty"),
        (json.dumps({"type": "message", "text": "x" * 5000}), "message_too_long"),
    ],
)
def test_bad_frames_get_a_localized_error_and_the_socket_stays_open(ws_client, frame, code):
    created = conversation_create(language="ru")
    client = ws_client(_path(created.conversation, created.access_token))
    assert client.connect()[0]
    client.send_text(frame)
    error = client.receive()
    assert error["type"] == "error"
    assert error["payload"]["code"] == code
    assert any("\u0400" <= ch <= "\u04ff" for ch in error["payload"]["message"])  # Russian text
    # Still usable: a second bad frame gets a second answer.
    client.send_text("{still not json")
    assert client.receive()["payload"]["code"] == "bad_frame"
    assert not Message.objects.filter(conversation=created.conversation).exists()


def test_llm_down_fails_the_turn_but_keeps_the_message_and_the_worker(llm, celery_worker, ws_client):
    created = conversation_create(language="en")
    client = ws_client(_path(created.conversation, created.access_token))
    assert client.connect()[0]
    with llm.down():
        client.send_json({"type": "message", "text": "Is anyone there?"})
        frames = client.receive_until(lambda f: f["type"] == "done", timeout=60)
    error = next(f for f in frames if f["type"] == "error")
    assert error["payload"]["code"] == "llm_unavailable"
    assert error["payload"]["stage"] == "sgr"
    assert "temporarily unavailable" in error["payload"]["message"]
    turn = Turn.objects.get(conversation=created.conversation)
    assert turn.status == Turn.Status.FAILED
    assert turn.user_message.text == "Is anyone there?"
    assert "APIConnectionError" in turn.error_detail

    # The worker survived and serves the next turn.
    assert celery_worker.poll() is None
    client.send_json({"type": "message", "text": "Hello again"})
    client.receive_until(lambda f: f["type"] == "done" and f["turn"] != turn.pk, timeout=60)
    assert wait_for_turn(Turn.objects.latest("id").pk).status == Turn.Status.DONE


def test_malformed_plan_arguments_fall_back_and_the_turn_completes(llm, celery_worker, ws_client):
    # The first output and the one repair attempt are both invalid: the recorded fallback plan is used.
    llm.push(
        Reply(tool_calls=[{"name": "analyse_user_request", "arguments": "{not json"}]),
        Reply(tool_calls=[{"name": "analyse_user_request", "arguments": '{"spam_score": 7}'}]),
    )
    created = conversation_create(language="en")
    client = ws_client(_path(created.conversation, created.access_token))
    assert client.connect()[0]
    client.send_json({"type": "message", "text": "Refund please"})
    client.receive_until(lambda f: f["type"] == "done", timeout=60)
    turn = Turn.objects.get(conversation=created.conversation)
    assert turn.status == Turn.Status.DONE
    assert turn.plan_result["plan_status"] == "fallback"
    assert turn.plan_result["raw_arguments"] == "{not json"


def test_stream_cut_midway_is_retried_after_a_retract_and_the_replay_has_one_answer(llm, celery_worker, ws_client):
    llm.answer_text = "Complete answer after the retry."
    llm.push(
        Reply(tool_calls=[{"name": "analyse_user_request", "arguments": json.dumps(llm.plan_args)}]),
        Reply(content="one two three four five six", cut_after=3),
    )
    created = conversation_create(language="en")
    client = ws_client(_path(created.conversation, created.access_token))
    assert client.connect()[0]
    client.send_json({"type": "message", "text": "Tell me a story"})
    frames = client.receive_until(lambda f: f["type"] == "done", timeout=60)
    types = [f["type"] for f in frames]
    retract = types.index("retract")
    before = "".join(f["payload"]["text"] for f in frames[:retract] if f["type"] == "token")
    after = "".join(f["payload"]["text"] for f in frames[retract:] if f["type"] == "token")
    assert before == "one two three"  # the cut attempt's tokens, then the retract drops them
    assert after == llm.answer_text  # the retry streams the whole answer once
    assert "error" not in types
    turn = Turn.objects.get(conversation=created.conversation)
    assert turn.status == Turn.Status.DONE and turn.answer_text == llm.answer_text
    assert len(llm.chat_requests()) == 3  # plan, cut answer, retried answer

    # A client that saw only the first two tokens and reconnects gets the rest exactly once.
    seqs = [f["seq"] for f in frames if f["seq"] is not None]
    second_token = [f for f in frames if f["type"] == "token"][1]["seq"]
    replayed = ws_client(_path(created.conversation, created.access_token, last_seq=second_token))
    assert replayed.connect()[0]
    rest = replayed.receive_until(lambda f: f["type"] == "done", timeout=10)
    assert [f["seq"] for f in rest] == [s for s in seqs if s > second_token]


def test_an_idle_socket_still_gets_events_after_the_layer_blocking_timeout(ws_client, no_enqueue):  # we emit
    # A slow planning call leaves the socket idle for longer than the channel layer's
    # 5 s blocking read: the live event must still arrive, and the socket stay open.
    from supportdesk.events import turn_event_emit

    created = conversation_create(language="en")
    client = ws_client(_path(created.conversation, created.access_token))
    assert client.connect()[0]
    turn = message_receive(conversation=created.conversation, text="slow question")
    client.receive_until(lambda f: f["type"] == "status")  # the queued status
    time.sleep(6.5)
    turn_event_emit(turn=turn, type="status", payload={"status": "planning"})
    frame = client.receive(timeout=10)
    assert frame["type"] == "status" and frame["payload"]["status"] == "planning"
