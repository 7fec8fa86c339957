"""Database connections: workers keep theirs between tasks; one customer's slow save never queues another's."""

from __future__ import annotations

import threading
import time

import pytest
from django.conf import settings
from django.db import connection, connections, transaction

from supportdesk.models import Turn
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create
from tests.conftest import wait_for_turn

pytestmark = pytest.mark.django_db(transaction=True)


def _path(created: object) -> str:
    return f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}"


def _worker_sessions() -> set[tuple[int, object]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE application_name = 'supportdesk-worker' "
            "AND datname = current_database()"
        )
        return set(cursor.fetchall())


def _until_a_session_waits_on_a_lock(timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND datname = current_database()")
            if cursor.fetchone()[0]:
                return
        time.sleep(0.02)
    raise AssertionError("the slow customer's save never reached the lock")


@pytest.mark.worker
def test_the_worker_keeps_its_database_connection_between_turns(llm, celery_worker):
    first = message_receive(conversation=conversation_create().conversation, text="How do I reset my password?")
    assert wait_for_turn(first.pk).status == Turn.Status.DONE
    time.sleep(1.0)  # let the last task's clean-up run: it must not close the connection
    kept = _worker_sessions()
    assert kept, "the worker closed its database connection after the turn"

    second = message_receive(conversation=conversation_create().conversation, text="And my e-mail?")
    assert wait_for_turn(second.pk).status == Turn.Status.DONE
    time.sleep(1.0)
    after = _worker_sessions()
    # The stage worker's pooled sessions outlive the turns: none was replaced, and the pool stayed under its cap.
    assert kept <= after and len(after) <= settings.WORKER_DB_POOL_MAX_SIZE


def test_a_customer_whose_save_is_held_up_does_not_hold_up_another(no_enqueue, ws_client):
    slow, other = conversation_create(), conversation_create()
    locked, release = threading.Event(), threading.Event()

    def hold_the_slow_conversation() -> None:
        # Every event of a conversation takes its row lock: hold it, so the slow customer's save waits.
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(
                    "SELECT id FROM supportdesk_conversation WHERE id = %s FOR UPDATE", [slow.conversation.pk]
                )
                locked.set()
                release.wait(30)
                cursor.execute("COMMIT")
        finally:
            connections["default"].close()

    holder = threading.Thread(target=hold_the_slow_conversation)
    holder.start()
    try:
        assert locked.wait(10)
        slow_client, other_client = ws_client(_path(slow)), ws_client(_path(other))
        assert slow_client.connect()[0] and other_client.connect()[0]
        slow_client.send_json({"type": "message", "text": "first, and stuck"})
        _until_a_session_waits_on_a_lock()  # the slow save is under way, blocked by the holder
        other_client.send_json({"type": "message", "text": "second, not stuck"})
        assert other_client.receive(timeout=5)["type"] == "accepted"
        assert Turn.objects.filter(conversation=slow.conversation).count() == 0  # still waiting
    finally:
        release.set()
        holder.join(10)
    assert slow_client.receive(timeout=10)["type"] == "accepted"
    assert len(no_enqueue) == 2


def test_a_statement_run_again_on_a_connection_is_prepared_once_and_reused(no_enqueue):
    from supportdesk.selectors import turn_get_for_stage

    turn = message_receive(conversation=conversation_create().conversation, text="Where is my parcel?")

    def prepared_turn_loads() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM pg_prepared_statements WHERE statement LIKE %s",
                           ['SELECT "supportdesk_turn"."id"%JOIN "supportdesk_conversation"%'])
            return {name for (name,) in cursor.fetchall()}

    with transaction.atomic():  # one connection throughout (prepared statements belong to a connection)
        assert connection.settings_dict["OPTIONS"]["server_side_binding"] is True
        before = prepared_turn_loads()
        for _ in range(settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"] + 1):
            assert turn_get_for_stage(turn_id=turn.pk) == turn
        once = prepared_turn_loads()
        assert len(once - before) <= 1 and once  # planned once for this connection (or by an earlier test on it)
        for _ in range(3):
            assert turn_get_for_stage(turn_id=turn.pk) == turn
        assert prepared_turn_loads() == once  # and that plan runs again: nothing new prepared
