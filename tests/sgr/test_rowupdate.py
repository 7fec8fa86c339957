"""``sgr.rowupdate``: an instance's fields saved by one UPDATE built once, as ``save(update_fields=...)`` would."""

from __future__ import annotations

import pytest
from django.db import DatabaseError

from sgr.rowupdate import fields_update, fields_update_sql
from supportdesk.models import Turn
from tests.sgr.factories import turn_make


@pytest.mark.django_db
def test_the_named_fields_and_auto_now_are_saved_and_nothing_else():
    turn = turn_make()
    before = Turn.objects.get(pk=turn.pk)
    turn.answer_text, turn.error_code = "Saved.", "not saved"
    fields_update(turn, ["answer_text", "updated_at"])

    stored = Turn.objects.get(pk=turn.pk)
    assert (stored.answer_text, stored.error_code) == ("Saved.", before.error_code)
    assert stored.updated_at > before.updated_at  # pre_save ran, as save would


@pytest.mark.django_db
def test_the_sql_is_built_once_per_model_and_fields_and_bad_names_are_refused():
    first, second = turn_make(), turn_make(text="Another question")
    sql_first, params_first = fields_update_sql(first, ["answer_text", "answer_text", "updated_at"])
    sql_second, params_second = fields_update_sql(second, ["answer_text", "updated_at"])
    assert sql_first is sql_second  # the repeated name counts once; the same string, not compiled again
    assert (params_first[-1], params_second[-1]) == (first.pk, second.pk)
    with pytest.raises(ValueError, match="not columns of Turn"):
        fields_update_sql(first, ["answer_text", "events"])  # a reverse relation, no column


@pytest.mark.django_db
def test_a_row_that_is_gone_is_an_error_not_a_silent_no_op():
    turn = turn_make()
    Turn.objects.filter(pk=turn.pk).delete()
    turn.answer_text = "lost"
    with pytest.raises(DatabaseError, match=f"Turn {turn.pk} is gone"):
        fields_update(turn, ["answer_text"])
