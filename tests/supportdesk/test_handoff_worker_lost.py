"""A stage worker killed while a conversation waits for a person loses no customer message (issue #29).

The worker is killed with its whole process group while a model guardian screens the customer's
message; a new worker's recovery sweeper sends the stage again, and the message ends screened and
left to staff: stored once, never planned or answered, and the inbox is told.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from django.conf import settings

from devstack.workers import worker_specs
from supportdesk.handoff import conversation_handoff_request
from supportdesk.models import Message, Turn, TurnEvent
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create
from tests.conftest import until, worker_start, workers_stop
from tests.llm_stub import ScriptedLLM
from tests.supportdesk.test_worker_lost import _exemplar_vectors, _isolated, _pipeline_send  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_killed_stage_worker_loses_no_message_of_a_waiting_conversation(llm, no_enqueue, tmp_path, ws_client: Any):
    guard = ScriptedLLM()
    guard.answer_text, guard.plan_delay = "Safety: Safe\nCategories: None", 3.0  # a model guard: 3 s a message
    guard.start()
    env, app = _isolated(llm)
    env.update({"CELERY_VISIBILITY_TIMEOUT": "600", "CELERY_TASK_TIME_LIMIT": "300", "CELERY_TASK_SOFT_TIME_LIMIT": "240",
                "REDIS_URL": settings.REDIS_URL, "GUARD_PROVIDER": "qwen3guard", "GUARD_BASE_URL": guard.base_url,
                "GUARD_TIMEOUT": "20", "GUARD_DEADLINE": "30", "TURN_LEASE_SECONDS": "6",
                "TURN_RECOVERY_SWEEP_SECONDS": "1", "TURN_QUEUE_GRACE_SECONDS": "5"})
    stages = worker_specs(env)[0]
    created = conversation_create()
    conversation = created.conversation
    conversation_handoff_request(conversation=conversation, reason="widget_button")
    client = ws_client(f"/ws/conversations/{conversation.public_id}/?token={created.access_token}")
    assert client.connect()[0]
    doomed = worker_start(stages, env, tmp_path / "doomed.log", "doomed")
    rescuer = None
    try:
        turn = message_receive(conversation=conversation, text="Hello? Is anybody there? My order never arrived.")
        _pipeline_send(app, turn.pk)
        until(lambda: Turn.objects.get(pk=turn.pk).status == Turn.Status.GUARDING, 60, "the message to be screened")
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(10)
        assert Turn.objects.get(pk=turn.pk).status == Turn.Status.GUARDING
        rescuer = worker_start(stages, env, tmp_path / "rescuer.log", "rescuer")
        until(lambda: Turn.objects.get(pk=turn.pk).is_finished, 90, "the message's turn to finish")
        frames = client.receive_until(lambda f: f["type"] == "done", timeout=20)
    finally:
        workers_stop([p for p in (doomed, rescuer) if p is not None])
        app.control.purge()
        guard.stop()
    done = Turn.objects.get(pk=turn.pk)
    assert done.status == Turn.Status.HUMAN and done.guard_result["level"] == "Safe"
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1
    assert llm.chat_requests() == []  # never planned, never answered
    types = list(TurnEvent.objects.filter(turn=done).order_by("seq").values_list("type", flat=True))
    assert types.count("done") == 1 and not {"plan", "answer", "token"} & set(types)
    assert frames[-1]["payload"] == {"status": "human"}
    conversation.refresh_from_db()
    assert conversation.owner == "waiting"
