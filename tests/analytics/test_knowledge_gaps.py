"""Knowledge gaps: unanswered questions grouped by similarity, on the dashboard and the analyst API."""

from __future__ import annotations

import pytest

from analytics.gaps import knowledge_gaps
from sgr.models import PlanRecord
from tests.sgr.factories import sgr_isolated, turn_make

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]


def _gap(text: str, *, language: str = "en", action: str = "no_answer", rule: str = "kb_not_covered",
         share: float | None = None, searched: list[str] | None = None) -> PlanRecord:
    turn = turn_make(text=text, language=language)
    return PlanRecord.objects.create(
        turn=turn, conversation=turn.conversation, language=language, final_action=action, routing_rule=rule,
        answer_supported_share=share, metadata={"answer": {"searched_queries": searched or [text]}})


def test_similar_unanswered_questions_are_one_gap_and_answered_ones_are_none():
    _gap("How can I get a refund for my annual plan?", searched=["refund annual plan"])
    _gap("Can I get my money back for the annual plan?", searched=["money back annual plan"])
    _gap("Как вернуть деньги за годовой тариф?", language="ru", searched=["возврат годовой тариф"])
    _gap("Do you support single sign-on with Okta?")
    _gap("What does the widget's dark theme look like?", action="normal", rule="default", share=0.2)
    _gap("How do I embed the widget?", action="normal", rule="default", share=1.0)  # answered and grounded

    groups = knowledge_gaps()
    refunds = groups[0]
    assert refunds.count == 3 and refunds.languages == {"en": 2, "ru": 1}
    assert set(refunds.searches) == {"refund annual plan", "money back annual plan", "возврат годовой тариф"}
    assert refunds.reasons == {"kb_not_covered": 3}
    rest = {g.question: g for g in groups[1:]}
    assert set(rest) == {"Do you support single sign-on with Okta?", "What does the widget's dark theme look like?"}
    assert rest["What does the widget's dark theme look like?"].reasons == {"mostly_unsupported": 1}


def test_the_dashboard_and_the_analyst_api_list_the_gaps(admin_client, client):
    from supportdesk.apikeys import api_key_create

    _gap("How can I get a refund for my annual plan?")
    _gap("Can I get my money back for the annual plan?")
    page = admin_client.get("/admin/dashboard/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="sd-gaps"' in html and "How can I get a refund for my annual plan?" in html and "2 wordings" in html

    key = api_key_create(name="analyst", scopes=["analyst"]).raw_key
    response = client.get("/api/v1/plan-records/knowledge-gaps", HTTP_X_API_KEY=key)
    assert response.status_code == 200
    (group,) = response.json()
    assert group["count"] == 2 and len(group["plan_record_ids"]) == 2
    assert client.get("/api/v1/plan-records/knowledge-gaps").status_code == 401
