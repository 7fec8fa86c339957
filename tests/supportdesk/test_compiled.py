"""Statements built once (supportdesk.compiled, turn_fields_save): the same rows, objects and writes as the ORM's."""

from __future__ import annotations

import threading

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import Model
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from sgr.models import PlanRecord
from supportdesk.compiled import CompiledRead
from supportdesk.events import conversation_events_after, turn_event_emit
from supportdesk.models import Conversation, Turn, TurnEvent
from supportdesk.pipeline.submit import message_receive
from supportdesk.selectors import (
    turn_get_for_stage, turn_plan_record, turn_synthetic, turns_before,
)
from supportdesk.services import (
    conversation_create, turn_fields_save, turn_lock_at, turn_lock_owner, turn_lock_unfinished, turn_status_set,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _field_values(instance: Model) -> dict[str, object]:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def test_the_turn_for_a_stage_is_the_orm_s_turn_with_its_conversation_message_and_plan_record(no_enqueue):
    turn = message_receive(conversation=conversation_create(language="de").conversation, text="Wie setze ich das zurück?")
    Turn.objects.filter(pk=turn.pk).update(plan_result={"action": "normal", "ids": [1, 2]}, diagnostics={"a": {"b": 1}})
    expected = Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk)
    assert turn_plan_record(turn_get_for_stage(turn_id=turn.pk)) is None  # not planned yet
    expected_record = PlanRecord.objects.create(turn_id=turn.pk, conversation_id=turn.conversation_id,
                                                plan={"action": "normal"}, context_synthetic="## Analysis")
    expected_record.refresh_from_db()

    for _ in range(2):  # compiled at the first call, reused at the second
        loaded = turn_get_for_stage(turn_id=turn.pk)
        assert loaded is not None and loaded.pk == turn.pk
        assert _field_values(loaded) == _field_values(expected)  # JSON decoded, datetimes aware
        assert loaded.plan_result == {"action": "normal", "ids": [1, 2]}
        with CaptureQueriesContext(connection) as queries:  # both related objects came with the row
            assert _field_values(loaded.conversation) == _field_values(expected.conversation)
            assert _field_values(loaded.user_message) == _field_values(expected.user_message)
            assert loaded.user_message.turn is loaded
            record = turn_plan_record(loaded)
            assert record is not None and record.turn_id == turn.pk and record.plan == {"action": "normal"}
            assert _field_values(record) == _field_values(expected_record)
        assert queries.captured_queries == []
        assert not loaded._state.adding and loaded._state.db == "default"
    assert turn_get_for_stage(turn_id=turn.pk + 1000) is None


def test_the_turn_lock_reads_the_status_inside_a_transaction_only(no_enqueue):
    turn = message_receive(conversation=conversation_create().conversation, text="hello")
    with transaction.atomic():
        assert turn_lock_at(turn=turn, status=Turn.Status.QUEUED)
        assert not turn_lock_at(turn=turn, status=Turn.Status.GUARDING)
        assert turn_lock_unfinished(turn=turn)
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.DONE)
    with transaction.atomic():
        assert not turn_lock_unfinished(turn=turn)
    with pytest.raises(TransactionManagementError):  # FOR UPDATE outside a transaction, as the ORM says
        turn_lock_at(turn=turn, status=Turn.Status.DONE)


def test_the_turn_lock_reads_the_conversation_s_owner_and_locks_the_turn_only(no_enqueue):
    turn = message_receive(conversation=conversation_create().conversation, text="hello")
    with transaction.atomic():
        assert turn_lock_owner(turn=turn, status=Turn.Status.QUEUED) == Conversation.Owner.BOT
        assert turn_lock_owner(turn=turn, status=Turn.Status.GUARDING) is None
        # The conversation's row is not locked: staff can claim it meanwhile (another connection).
        claimed = threading.Thread(target=_owner_set, args=(turn.conversation_id, Conversation.Owner.HUMAN))
        claimed.start()
        claimed.join(10)
        assert not claimed.is_alive()
        assert turn_lock_owner(turn=turn, status=Turn.Status.QUEUED) == Conversation.Owner.HUMAN


def _owner_set(conversation_id: int, owner: str) -> None:
    try:
        with transaction.atomic():  # NOWAIT: a locked row fails at once instead of waiting for the test
            list(Conversation.objects.select_for_update(nowait=True).filter(pk=conversation_id))
            Conversation.objects.filter(pk=conversation_id).update(owner=owner)
    finally:
        connection.close()


def test_a_parameter_that_does_not_reach_the_sql_is_refused():
    read = CompiledRead(lambda pk, seq: Conversation.objects.filter(pk=pk, last_event_seq__gte=0), parameters=2)
    with pytest.raises(ValueError, match="does not reach the SQL"):
        read.first(1, 2)


def test_the_events_after_a_seq_are_the_conversation_s_in_order(no_enqueue):
    conversation = conversation_create().conversation
    turn = message_receive(conversation=conversation, text="hello")  # its status event: seq 1
    message_receive(conversation=conversation_create().conversation, text="another customer")
    for text in ("a", "b", "c"):
        turn_event_emit(turn=turn, type="token", payload={"text": text})
    after = conversation_events_after(conversation=conversation, after_seq=2)
    assert [(event.seq, event.type, event.payload) for event in after] == [
        (3, "token", {"text": "b"}), (4, "token", {"text": "c"})]
    assert after[0].as_frame() == TurnEvent.objects.get(conversation=conversation, seq=3).as_frame()
    assert conversation_events_after(conversation=conversation, after_seq=4) == []


def test_a_parameter_used_twice_is_bound_in_both_places():
    conversation = conversation_create().conversation
    Conversation.objects.filter(pk=conversation.pk).update(last_event_seq=conversation.pk)
    read = CompiledRead(lambda pk: Conversation.objects.filter(pk=pk, last_event_seq=pk).values_list("pk"))
    assert read.first(conversation.pk) == (conversation.pk,)
    Conversation.objects.filter(pk=conversation.pk).update(last_event_seq=conversation.pk + 1)
    assert read.first(conversation.pk) is None


def test_the_turns_before_are_the_conversation_s_earlier_turns_with_what_the_history_reads(no_enqueue):
    conversation = conversation_create().conversation
    first = message_receive(conversation=conversation, text="first question")
    Turn.objects.filter(pk=first.pk).update(plan_result={"context_synthetic": "analysis"})
    second = message_receive(conversation=conversation, text="second question")
    other = message_receive(conversation=conversation_create().conversation, text="another customer")
    third = message_receive(conversation=conversation, text="third question")

    earlier = turns_before(turn=third)
    assert [past.pk for past in earlier] == [first.pk, second.pk]
    with CaptureQueriesContext(connection) as queries:  # the messages and the (missing) plan records came with the rows
        assert [past.user_message.text for past in earlier] == ["first question", "second question"]
        assert [past.answer_message for past in earlier] == [None, None]
        assert turn_synthetic(earlier[0]) == "analysis" and turn_synthetic(earlier[1]) == ""
    assert queries.captured_queries == []
    assert turns_before(turn=first) == [] and turns_before(turn=other) == []


def test_a_turn_s_fields_are_saved_as_save_would_and_a_gone_turn_fails(no_enqueue):
    turn = message_receive(conversation=conversation_create().conversation, text="hello")
    before = Turn.objects.get(pk=turn.pk).updated_at
    turn.status, turn.guard_result, turn.ui_response = Turn.Status.PLANNING, {"status": "passed"}, "kept in memory only"
    turn_fields_save(turn=turn, fields=("status", "guard_result"))
    saved = Turn.objects.get(pk=turn.pk)
    assert (saved.status, saved.guard_result, saved.ui_response) == (Turn.Status.PLANNING, {"status": "passed"}, "")
    assert saved.updated_at == turn.updated_at > before
    turn.guard_result = None  # SQL NULL, as save stores it
    turn_fields_save(turn=turn, fields=("guard_result",))
    assert Turn.objects.filter(pk=turn.pk, guard_result__isnull=True).exists()
    Turn.objects.filter(pk=turn.pk).delete()
    with pytest.raises(DatabaseError, match="gone"):
        turn_fields_save(turn=turn, fields=("status",))


def test_a_status_and_its_events_are_one_statement_in_order_and_a_gone_turn_stores_none(no_enqueue):
    turn = message_receive(conversation=conversation_create().conversation, text="hello")
    turn.guard_result = {"status": "passed"}
    with CaptureQueriesContext(connection) as queries:
        turn_status_set(turn=turn, status=Turn.Status.PLANNING, also=("guard_result",))
    assert len(queries.captured_queries) == 1
    saved = Turn.objects.get(pk=turn.pk)
    assert (saved.status, saved.guard_result) == (Turn.Status.PLANNING, {"status": "passed"})
    last = TurnEvent.objects.filter(turn=turn).order_by("-seq").first()
    assert last is not None and (last.type, last.payload) == ("status", {"status": "planning"})
    assert last.seq == Conversation.objects.get(pk=turn.conversation_id).last_event_seq
    with CaptureQueriesContext(connection) as queries:
        turn_status_set(turn=turn, status=Turn.Status.ANSWERING,
                        before=[("plan", {"action": "normal", "text": "Ok"}), ("citation", {"number": 1})])
    assert len(queries.captured_queries) == 1
    events = list(TurnEvent.objects.filter(turn=turn, seq__gt=last.seq).order_by("seq"))
    assert [(e.seq - last.seq, e.type, e.payload) for e in events] == [
        (1, "plan", {"action": "normal", "text": "Ok"}), (2, "citation", {"number": 1}),
        (3, "status", {"status": "answering"})]
    last = events[-1]
    assert Conversation.objects.get(pk=turn.conversation_id).last_event_seq == last.seq
    Turn.objects.filter(pk=turn.pk).delete()
    with pytest.raises(DatabaseError, match="gone"):
        turn_status_set(turn=turn, status=Turn.Status.ANSWERING)
    assert not TurnEvent.objects.filter(conversation_id=turn.conversation_id, turn__isnull=True).exists()
    assert Conversation.objects.get(pk=turn.conversation_id).last_event_seq == last.seq  # no seq taken
