"""One time budget per turn: a model that hangs gets the customer a clear error within it, not minutes
of a bare typing indicator (60 s timeout x 2 client tries x 3 stage tries before the budget)."""

from __future__ import annotations

import json
import time

import pytest

from sgr.strings import ui_string
from supportdesk.models import Turn, TurnEvent
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create
from tests.conftest import until, exemplar_vectors_stored, worker_start, workers_stop
from tests.llm_stub import Reply
from tests.supportdesk.test_worker_lost import _isolated, _pipeline_send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

BUDGET = 8  # seconds


def test_a_hanging_model_fails_the_turn_within_its_budget_with_a_localized_error(llm, no_enqueue, tmp_path,
                                                                                django_db_blocker):
    from devstack.workers import worker_specs

    exemplar_vectors_stored(django_db_blocker)
    hang = Reply(tool_calls=[{"name": "analyse_user_request", "arguments": json.dumps(llm.plan_args)}], delay=120)
    llm.push(hang, hang, hang, hang, hang, hang)
    env, app = _isolated(llm)
    env.update({"LLM_TIMEOUT": "60", "LLM_MAX_RETRIES": "1", "STAGE_MAX_RETRIES": "2", "STAGE_RETRY_BACKOFF": "1",
                "TURN_DEADLINE_SECONDS": str(BUDGET), "CELERY_TASK_TIME_LIMIT": "300",
                "CELERY_TASK_SOFT_TIME_LIMIT": "240", "CELERY_VISIBILITY_TIMEOUT": "600"})
    worker = worker_start(worker_specs(env)[0], env, tmp_path / "worker.log", "deadline")
    try:
        turn = message_receive(conversation=conversation_create(language="ru").conversation, text="Как сменить пароль?")
        sent = time.monotonic()
        _pipeline_send(app, turn.pk)
        until(lambda: Turn.objects.get(pk=turn.pk).is_finished, 60, "the turn to end")
        took = time.monotonic() - sent
    finally:
        workers_stop([worker])
        app.control.purge()
    failed = Turn.objects.get(pk=turn.pk)
    assert failed.status == Turn.Status.FAILED and failed.error_code == "llm_unavailable"
    assert took < BUDGET + 10, f"the customer waited {took:.0f}s"  # a bound, not a benchmark: minutes before
    error = TurnEvent.objects.get(turn=failed, type="error")
    assert error.payload["message"] == ui_string("error_llm_unavailable", "ru")
    assert failed.user_message.text == "Как сменить пароль?"
    planning_calls = [r for r in llm.chat_requests() if r.get("tool_choice")]
    assert 1 <= len(planning_calls) <= 2  # cut to the budget: no third minute-long try
