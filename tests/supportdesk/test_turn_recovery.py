"""Turn recovery without a worker: leases, the sweeper's choices, a broker that is away, the turn budget."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sgr.strings import ui_string
from supportdesk.pipeline import leases, recovery
from supportdesk.llm import call_time_left, calls_deadline, llm_client
from supportdesk.models import Turn, TurnEvent
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create, turn_finish, turn_status_set
from supportdesk.events import turn_event_emit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """Stages the sweeper sends, recorded instead of going to the broker."""
    calls: list[tuple[int, str]] = []
    monkeypatch.setattr(recovery, "stage_send", lambda turn: calls.append((turn.pk, turn.status)))
    return calls


TEXTS = {"en": "Where is my invoice?", "ru": "Где мой счёт?"}


def _turn(status: str = Turn.Status.QUEUED, *, language: str = "en", **fields: object) -> Turn:
    turn = message_receive(conversation=conversation_create(language=language).conversation, text=TEXTS[language])
    Turn.objects.filter(pk=turn.pk).update(status=status, **fields)
    turn.refresh_from_db()
    return turn


def _ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


def test_a_lease_is_held_by_one_task_until_released_or_lapsed(no_enqueue, settings):
    turn = _turn()
    assert leases.lease_claim(turn_id=turn.pk, owner="guard:a")
    assert not leases.lease_claim(turn_id=turn.pk, owner="guard:b")  # a live lease keeps a second copy of its stage out
    assert leases.lease_claim(turn_id=turn.pk, owner="guard:a")  # the holder's retry keeps it
    leases.lease_release(turn_id=turn.pk, owner="guard:b")  # not b's to give back
    assert not leases.lease_claim(turn_id=turn.pk, owner="guard:b")
    leases.lease_release(turn_id=turn.pk, owner="guard:a")
    assert leases.lease_claim(turn_id=turn.pk, owner="guard:b")
    Turn.objects.filter(pk=turn.pk).update(lease_until=_ago(1))  # b's worker died: nobody renewed it
    assert leases.lease_claim(turn_id=turn.pk, owner="guard:c")


def test_a_stage_reads_its_turn_and_claims_it_in_one_statement_only_while_unfinished(no_enqueue):
    turn = _turn(Turn.Status.PLANNING)
    with CaptureQueriesContext(connection) as queries:
        loaded, claimed = leases.turn_claim_for_stage(turn_id=turn.pk, owner="sgr:a")
    assert len(queries.captured_queries) == 1
    assert claimed and loaded is not None and loaded.pk == turn.pk and loaded.status == Turn.Status.PLANNING
    assert loaded.user_message.text == TEXTS["en"] and loaded.conversation.pk == turn.conversation_id
    assert loaded.lease_owner == ""  # the row as it was before the claim
    assert Turn.objects.get(pk=turn.pk).lease_owner == "sgr:a"
    assert leases.turn_claim_for_stage(turn_id=turn.pk, owner="sgr:b")[1] is False  # a live lease keeps b out
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.DONE, lease_owner="", lease_until=None)
    loaded, claimed = leases.turn_claim_for_stage(turn_id=turn.pk, owner="sgr:c")
    assert loaded is not None and loaded.is_finished and not claimed
    assert Turn.objects.get(pk=turn.pk).lease_owner == ""  # an ended turn takes no lease
    assert leases.turn_claim_for_stage(turn_id=turn.pk + 1000, owner="sgr:d") == (None, False)


def test_a_later_stage_takes_over_a_lease_its_predecessor_could_not_give_back(no_enqueue):
    turn = _turn(Turn.Status.PLANNING)
    guard = leases.lease_owner_name("guard", "task-1")
    assert leases.lease_claim(turn_id=turn.pk, owner=guard)  # the guard stage ended without releasing it
    assert leases.lease_claim(turn_id=turn.pk, owner=leases.lease_owner_name("sgr", "task-2"))
    assert not leases.lease_claim(turn_id=turn.pk, owner=leases.lease_owner_name("sgr", "task-3"))


def test_a_running_stage_keeps_its_lease_alive(no_enqueue, settings):
    settings.TURN_LEASE_SECONDS = 30
    turn = _turn()
    owner = leases.lease_owner_name("guard", "task-1")
    with leases.stage_lease(turn_id=turn.pk, owner=owner) as leased:
        assert leased
        Turn.objects.filter(pk=turn.pk).update(lease_until=_ago(-1))  # about to lapse
        assert leases.leases_renew() == 1
        turn.refresh_from_db()
        assert turn.lease_owner == owner and turn.lease_until > timezone.now() + timedelta(seconds=20)
        with leases.stage_lease(turn_id=turn.pk, owner=leases.lease_owner_name("guard", "task-2")) as second:
            assert not second
    turn.refresh_from_db()
    assert turn.lease_owner == "" and turn.lease_until is None
    assert leases.leases_renew() == 0


def test_the_update_that_moves_a_turn_on_or_ends_it_gives_the_lease_back_with_no_statement_of_its_own(no_enqueue):
    for move in (lambda turn: turn_status_set(turn=turn, status=Turn.Status.PLANNING),
                 lambda turn: turn_finish(turn=turn, status=Turn.Status.BLOCKED)):
        turn = _turn(Turn.Status.GUARDING)
        owner = leases.lease_owner_name("guard", "task-1")
        with CaptureQueriesContext(connection) as queries:
            with leases.stage_lease(turn_id=turn.pk, owner=owner, turn=turn) as leased:
                assert leased and Turn.objects.get(pk=turn.pk).lease_owner == owner
                move(turn)
        assert not any(q["sql"].lstrip().startswith("UPDATE") and "lease_owner = ''" in q["sql"]
                       for q in queries.captured_queries)  # no release of its own
        turn.refresh_from_db()
        assert turn.lease_owner == "" and turn.lease_until is None
    turn = _turn(Turn.Status.GUARDING)
    with leases.stage_lease(turn_id=turn.pk, owner=owner, turn=turn) as leased:
        assert leased  # a stage that leaves the turn where it was still gives the lease back
    turn.refresh_from_db()
    assert turn.lease_owner == "" and turn.lease_until is None
    turn = _turn(Turn.Status.GUARDING)
    with pytest.raises(RuntimeError), leases.stage_lease(turn_id=turn.pk, owner=owner, turn=turn):
        with transaction.atomic():
            turn_status_set(turn=turn, status=Turn.Status.PLANNING)
            raise RuntimeError("rolled back")  # the move and its lease hand-back with it
    turn.refresh_from_db()
    assert turn.status == Turn.Status.GUARDING and turn.lease_owner == "" and turn.lease_until is None


def test_the_sweeper_resends_a_lapsed_stage_and_retracts_the_half_answer(no_enqueue, sent, settings):
    turn = _turn(Turn.Status.ANSWERING, language="ru", lease_owner="dead:1:x", lease_until=_ago(1))
    turn_event_emit(turn=turn, type="token", payload={"text": "Половина отве"})
    busy = _turn(Turn.Status.PLANNING, lease_owner="alive:1:y", lease_until=_ago(-30))
    assert recovery.turns_recover() == [turn.pk]
    assert sent == [(turn.pk, Turn.Status.ANSWERING)]
    turn.refresh_from_db()
    assert turn.status == Turn.Status.ANSWERING and turn.recoveries == 1 and turn.lease_until is None
    *_, token, retract, status = TurnEvent.objects.filter(turn=turn).order_by("seq")
    assert token.type == "token"
    assert retract.type == "retract" and retract.payload["text"] == ""
    assert status.type == "status" and status.payload["recovering"] is True
    assert status.payload["message"] == ui_string("status_recovering", "ru") != "status_recovering"
    busy.refresh_from_db()
    assert busy.recoveries == 0  # its worker is alive


def test_a_sweeper_whose_clock_runs_ahead_leaves_live_leases_alone(no_enqueue, sent, settings, monkeypatch):
    """Workers on other hosts: a lease's end is the database's clock (``now() + lease``), and so is the
    sweeper's "lapsed", whatever the sweeping host's clock says."""
    settings.TURN_LEASE_SECONDS = 20
    turn = _turn(Turn.Status.ANSWERING)
    assert leases.lease_claim(turn_id=turn.pk, owner=leases.lease_owner_name("answer", "task-1"))
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(minutes=10))  # this host's clock is ahead
    assert recovery.turns_recover() == [] and sent == []
    monkeypatch.setattr(timezone, "now", real_now)
    Turn.objects.filter(pk=turn.pk).update(lease_until=_ago(1))  # its worker died: nobody renewed it
    monkeypatch.setattr(timezone, "now", lambda: real_now() - timedelta(minutes=10))  # ... and one behind
    assert recovery.turns_recover() == [turn.pk]


def test_a_message_marked_for_recovery_is_due_by_the_database_clock(no_enqueue, sent, monkeypatch):
    turn = _turn(Turn.Status.QUEUED)
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(minutes=10))  # the web host's clock is ahead
    leases.turn_recovery_due(turn_id=turn.pk)
    monkeypatch.setattr(timezone, "now", real_now)
    time.sleep(0.01)
    assert recovery.turns_recover() == [turn.pk]


def test_a_turn_no_worker_claimed_is_resent_after_the_grace_period_only(no_enqueue, sent, settings):
    settings.TURN_QUEUE_GRACE_SECONDS = 60
    waiting = _turn(Turn.Status.QUEUED)
    forgotten = _turn(Turn.Status.PLANNING)
    Turn.objects.filter(pk=forgotten.pk).update(updated_at=_ago(61))
    assert recovery.turns_recover() == [forgotten.pk]
    assert sent == [(forgotten.pk, Turn.Status.PLANNING)]
    assert TurnEvent.objects.filter(turn=waiting).count() == 1  # only its "queued" status


def test_a_turn_out_of_chances_fails_with_its_message_kept(no_enqueue, sent, settings):
    settings.TURN_RECOVERY_MAX = 2
    tired = _turn(Turn.Status.PLANNING, lease_until=_ago(1), recoveries=2)
    late = _turn(Turn.Status.QUEUED, language="ru", lease_until=_ago(1))
    Turn.objects.filter(pk=late.pk).update(created_at=_ago(settings.TURN_DEADLINE_SECONDS + 1))
    assert sorted(recovery.turns_recover()) == sorted([tired.pk, late.pk])
    assert sent == []
    for turn, language in ((tired, "en"), (late, "ru")):
        turn.refresh_from_db()
        assert turn.status == Turn.Status.FAILED and turn.error_code == "turn_timeout"
        assert turn.user_message.text == TEXTS[language]
        error = TurnEvent.objects.get(turn=turn, type="error")
        assert error.payload["message"] == ui_string("error_turn_timeout", language)
        assert TurnEvent.objects.filter(turn=turn, type="done").count() == 1


def test_a_sweep_with_the_broker_away_changes_nothing(no_enqueue, monkeypatch):
    turn = _turn(Turn.Status.ANSWERING, lease_until=_ago(1))

    def broker_down(turn: Turn) -> None:
        raise ConnectionRefusedError("broker away")

    monkeypatch.setattr(recovery, "stage_send", broker_down)
    recovery.turns_recover()
    turn.refresh_from_db()
    assert turn.recoveries == 0 and turn.lease_until is not None  # still due at the next sweep
    assert not TurnEvent.objects.filter(turn=turn, type="status", payload__recovering=True).exists()


def test_only_one_process_sweeps_at_a_time(no_enqueue, sent):
    from django.db import connections

    turn = _turn(Turn.Status.ANSWERING, lease_until=_ago(1))
    other = connections.create_connection("default")  # a second session holds the sweep lock
    try:
        with other.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [recovery.SWEEP_LOCK])
            assert recovery.turns_recover() == []
            cursor.execute("COMMIT")
    finally:
        other.close()
    assert recovery.turns_recover() == [turn.pk]


def test_a_message_sent_while_the_broker_is_away_is_kept_and_marked_for_recovery(monkeypatch):
    def broker_down(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError("broker away")

    monkeypatch.setattr("celery.canvas._chain.apply_async", broker_down)
    turn = message_receive(conversation=conversation_create().conversation, text="Where is my invoice?")
    turn.refresh_from_db()
    assert turn.status == Turn.Status.QUEUED and turn.user_message.text == "Where is my invoice?"
    assert turn.lease_until is not None and turn.lease_until <= timezone.now()  # due at the next sweep


def test_model_calls_are_cut_to_the_turn_budget(settings):
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.LLM_TIMEOUT = 60.0
    settings.LLM_MAX_RETRIES = 1
    assert call_time_left() is None
    assert llm_client().timeout == 60.0 and llm_client().max_retries == 1
    with calls_deadline(time.time() + 20):
        client = llm_client()
        assert 18 < client.timeout <= 20 and client.max_retries == 0
    with calls_deadline(time.time() + 500):
        assert llm_client().timeout == 60.0 and llm_client().max_retries == 1
    with calls_deadline(time.time() - 5):
        assert llm_client().timeout == 1.0  # past the budget: one last short try, never a long one


def test_a_turn_ends_once_even_when_two_copies_of_its_stage_finish_it(no_enqueue):
    from supportdesk.services import turn_fail, turn_finish

    turn = _turn(Turn.Status.ANSWERING)
    first, second = Turn.objects.get(pk=turn.pk), Turn.objects.get(pk=turn.pk)  # two copies, both saw "answering"
    turn_finish(turn=first, status=Turn.Status.DONE)
    turn_finish(turn=second, status=Turn.Status.DONE)
    turn_fail(turn=second, stage="answer", code="llm_unavailable")  # a late failure does not undo the answer
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE
    types = list(TurnEvent.objects.filter(turn=turn).values_list("type", flat=True))
    assert types.count("done") == 1 and "error" not in types


def test_waiting_for_the_local_model_to_start_costs_a_turn_none_of_its_budget(no_enqueue, sent, settings):
    from supportdesk.pipeline.runner import turn_deadline

    settings.TURN_QUEUE_GRACE_SECONDS = 60
    turn = _turn(Turn.Status.PLANNING)
    Turn.objects.filter(pk=turn.pk).update(created_at=_ago(settings.TURN_DEADLINE_SECONDS + 30), updated_at=_ago(120))
    leases.turn_waits_for_model(turn_id=turn.pk)  # the stage went back to the queue: the model is starting
    turn.refresh_from_db()
    assert turn_deadline(turn) > time.time() + settings.TURN_DEADLINE_SECONDS - 5  # a whole budget again
    assert recovery.turns_recover() == [] and sent == []  # looked after: neither failed nor sent again
    turn.refresh_from_db()
    assert turn.status == Turn.Status.PLANNING


def test_a_second_copy_of_a_stage_moves_nothing_the_first_already_moved(no_enqueue):
    from django.db import transaction

    from supportdesk.services import turn_lock_at

    turn = _turn(Turn.Status.PLANNING)
    with transaction.atomic():
        assert turn_lock_at(turn=turn, status=Turn.Status.PLANNING)
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.ANSWERING)  # the first copy planned it
    with transaction.atomic():
        assert not turn_lock_at(turn=turn, status=Turn.Status.PLANNING)
