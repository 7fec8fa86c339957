"""UI strings: database overrides, the fallback order, caching with invalidation."""

from __future__ import annotations

import pytest

import sgr.cache
from sgr.models import UIString
from sgr.strings import BUILTIN_STRINGS, ui_string

pytestmark = pytest.mark.django_db


def test_defaults_are_loaded_for_both_languages():
    for key in ("user_intent_prefix", "sgr_normal_response", "sgr_clarify_intro", "sgr_clarify_outro",
                "sgr_spam_response", "sgr_guardian_response", "error_internal", "widget_send"):
        for language in ("en", "ru"):
            assert UIString.objects.get(key=key, language=language).text == BUILTIN_STRINGS[key][language]


def test_a_database_edit_takes_effect_without_a_restart():
    assert ui_string("sgr_spam_response", "en") == BUILTIN_STRINGS["sgr_spam_response"]["en"]
    UIString.objects.filter(key="sgr_spam_response", language="en").update(text="stale")  # no signal: cached
    assert ui_string("sgr_spam_response", "en") == BUILTIN_STRINGS["sgr_spam_response"]["en"]
    row = UIString.objects.get(key="sgr_spam_response", language="en")
    row.text = "Only product questions, please."
    row.save()
    assert ui_string("sgr_spam_response", "en") == "Only product questions, please."


def test_another_process_edit_is_seen_through_the_shared_generation():
    ui_string("widget_send", "ru")  # cached now
    UIString.objects.filter(key="widget_send", language="ru").update(text="Послать")
    sgr.cache._generation_bump()  # what another process's save does
    assert ui_string("widget_send", "ru") == "Послать"


def test_a_stage_reads_the_generation_once_and_renders_from_one_snapshot(monkeypatch):
    ui_string("widget_send", "ru")  # cached now
    reads = []
    real_redis = sgr.cache._redis

    class Counting:
        def get(self, key):
            reads.append(key)
            return real_redis().get(key)

        def incr(self, key):
            return real_redis().incr(key)

    monkeypatch.setattr(sgr.cache, "_redis", lambda: Counting())
    with sgr.cache.content_generation_pinned():
        assert ui_string("widget_send", "ru") == BUILTIN_STRINGS["widget_send"]["ru"]
        UIString.objects.filter(key="widget_send", language="ru").update(text="Послать")
        sgr.cache._generation_bump()  # another process's edit, mid-stage
        assert ui_string("widget_send", "ru") == BUILTIN_STRINGS["widget_send"]["ru"]  # same snapshot
        ui_string("widget_send", "en")
    assert len(reads) == 1
    assert ui_string("widget_send", "ru") == "Послать"  # the next stage sees the edit
    assert len(reads) == 2


def test_fallback_order_requested_then_default_language_then_built_in(settings):
    settings.DEFAULT_LANGUAGE = "en"
    UIString.objects.update_or_create(key="only_english", language="en", defaults={"text": "English only"})
    assert ui_string("only_english", "ru") == "English only"  # requested missing -> default language
    UIString.objects.filter(key="widget_title", language="ru").delete()
    assert ui_string("widget_title", "ru") == BUILTIN_STRINGS["widget_title"]["ru"]  # -> built-in, same language
    UIString.objects.filter(key="widget_title").delete()
    assert ui_string("widget_title", "en") == BUILTIN_STRINGS["widget_title"]["en"]
    assert ui_string("no_such_key", "ru") == "no_such_key"
    assert ui_string("widget_title", "de") == ui_string("widget_title", "en")  # unsupported language


def test_parameters_are_substituted_but_nothing_else_is_evaluated():
    UIString.objects.filter(key="error_message_too_long", language="en").update(
        text="Too long: {max} max. {max.__class__} {0} {other}"
    )
    sgr.cache._generation_bump()
    assert ui_string("error_message_too_long", "en", max=10) == "Too long: 10 max. {max.__class__} {0} {other}"


@pytest.mark.django_db(transaction=True)
def test_websocket_errors_use_the_edited_string(ws_client):
    from supportdesk.services import conversation_create

    UIString.objects.update_or_create(key="error_bad_frame", language="ru", defaults={"text": "Непонятный запрос."})
    created = conversation_create(language="ru")
    client = ws_client(f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}")
    assert client.connect()[0]
    client.send_text("{not json")
    assert client.receive()["payload"] == {"code": "bad_frame", "message": "Непонятный запрос."}


def test_a_fixed_built_in_text_reaches_a_database_seeded_with_the_old_one(monkeypatch):
    seeded = UIString.objects.get(key="widget_send", language="en").text  # the data migration's row
    monkeypatch.setitem(BUILTIN_STRINGS, "widget_send", {**BUILTIN_STRINGS["widget_send"], "en": "Send it"})
    assert ui_string("widget_send", "en") == "Send it" != seeded  # the untouched seeded row is no override
    UIString.objects.filter(key="widget_send", language="en").update(text="Post")
    sgr.cache._generation_bump()
    assert ui_string("widget_send", "en") == "Post"  # a staff edit still wins


def test_apps_register_their_strings_explicitly():
    from analytics.messages import ANALYTICS_STRINGS
    from sgr.strings import strings_register

    assert all(BUILTIN_STRINGS[key] == texts for key, texts in ANALYTICS_STRINGS.items())  # AnalyticsConfig.ready
    strings_register(ANALYTICS_STRINGS)  # the same texts again: nothing changes
    with pytest.raises(ValueError, match="widget_send"):
        strings_register({"widget_send": {"en": "Another text"}})
