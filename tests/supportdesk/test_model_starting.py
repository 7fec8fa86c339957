"""The platform serves before the model: a message sent while the local model starts waits, then is answered once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from supportdesk.models import Message, Turn, TurnEvent
from supportdesk.modelstate import model_state, model_state_clear, model_state_write
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create
from tests.conftest import wait_for_turn


@pytest.fixture
def starting() -> Iterator[redis.Redis]:
    """The launcher's word that the model is starting, withdrawn after the test whatever happens."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    model_state_write(client, detail="loading the model: 40 %", since=time.time())
    yield client
    model_state_clear(client)


def _waits_logged(log: Path, turn_id: int) -> int:
    return log.read_text(errors="replace").count(f"stage sgr of turn {turn_id} waits for the model to start")


def _until(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_message_sent_while_the_model_starts_is_answered_once_it_is_up(llm, celery_worker, starting):
    conversation = conversation_create(language="en").conversation
    turn = message_receive(conversation=conversation, text="How do I reset my password?")

    # The guardian (rules and exemplars: no model) ran; the plan stage came back to the queue twice
    # without calling the model and without failing the turn.
    log = celery_worker.log_path
    _until(lambda: _waits_logged(log, turn.pk) >= 2)
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.PLANNING
    assert llm.chat_requests() == []

    model_state_clear(starting)
    done = wait_for_turn(turn.pk, timeout=60)
    assert done.status == Turn.Status.DONE and done.answer_text
    # Exactly once: one plan call, one answer call, one answer message, one answer event.
    requests = llm.chat_requests()
    assert len(requests) == 2 and requests[0].get("stream") is not True and requests[1]["stream"] is True
    assert Message.objects.filter(conversation=conversation, role=Message.Role.ASSISTANT).count() == 1
    assert TurnEvent.objects.filter(turn=turn, type="answer").count() == 1
    assert not TurnEvent.objects.filter(turn=turn, type="error").exists()


@pytest.mark.django_db
def test_the_widget_and_the_admin_say_the_assistant_is_starting(client, admin_client, starting):
    config = client.get("/api/widget/config?lang=ru").json()
    assert config["assistant"] == "starting"
    assert config["strings"]["widget_assistant_starting"].startswith("Ассистент запускается")
    page = admin_client.get("/admin/").content.decode()
    assert 'id="assistant-starting"' in page and "loading the model: 40 %" in page

    model_state_clear(starting)
    assert model_state().starting is False
    assert client.get("/api/widget/config").json()["assistant"] == "ready"
    assert 'id="assistant-starting"' not in admin_client.get("/admin/").content.decode()


def test_a_launcher_that_died_stops_holding_turns(starting):
    """The state lapses with its short TTL: a dead launcher never leaves turns waiting for ever."""
    assert model_state().starting is True
    assert 0 < starting.ttl("supportdesk:model:state") <= 30
