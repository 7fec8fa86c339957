"""Coverage before the answer: the words and the dense signal; the cut points fitted by calibrate_coverage."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from retrieval.coverage import CoverageCuts, coverage_assess
from retrieval.terms import name_held, names_of, term_stems

CUTS = CoverageCuts(dense_min=0.3, terms_min=0.6, dense_high=1.01, dense_cross=0.7)
WIDGET = "Add the widget to any page with one script tag. The data-theme attribute sets the dark theme."
WIDGET_RU = "Добавьте виджет на страницу одним тегом script. Атрибут data-theme включает тёмную тему."


def test_terms_are_content_words_by_stem():
    assert term_stems("How do I reset my password, please?") == {"reset", "passw"}
    assert term_stems("files") == term_stems("file")
    assert term_stems("Как изменить пароль?") == {"измен", "парол"}
    assert term_stems("Как встроить виджет на сайте?") == term_stems("встроить виджет, сайт")


def test_a_plausible_question_whose_key_word_is_in_no_article_is_not_covered():
    covered = coverage_assess(message="How do I switch the widget to the dark theme?", language="en", dense=0.8,
                              articles=[WIDGET], cuts=CUTS)
    assert covered.covered and covered.rule == "terms" and covered.terms == 0.75 and covered.missing == ["switch"]
    invoices = coverage_assess(message="My invoices page shows error 500 since yesterday", language="en",
                               dense=0.8, articles=[WIDGET], cuts=CUTS)
    assert not invoices.covered and "invoices" in invoices.missing and invoices.terms < 0.6
    far = coverage_assess(message="How do I switch the widget to the dark theme?", language="en", dense=0.1,
                          articles=[WIDGET], cuts=CUTS)
    assert not far.covered  # words alone are not enough when the topic is far


def test_no_articles_or_another_language_and_the_strong_match_rule():
    assert coverage_assess(message="Dark theme?", language="en", dense=0.99, articles=[], cuts=CUTS).rule == "no_articles"
    across = coverage_assess(message="Как включить тёмную тему?", language="ru", dense=0.75, articles=[WIDGET], cuts=CUTS)
    assert across.covered and across.rule == "dense_only" and across.terms is None
    short = coverage_assess(message="And login?", language="en", dense=0.75, articles=[WIDGET], cuts=CUTS)
    assert short.covered and short.rule == "dense_only"  # a follow-up: too few words to judge by words
    assert not coverage_assess(message="Как включить тёмную тему?", language="ru", dense=0.5, articles=[WIDGET],
                               cuts=CUTS).covered
    same = coverage_assess(message="Как включить тёмную тему виджета?", language="ru", dense=0.5,
                           articles=[WIDGET_RU, WIDGET], cuts=CUTS)
    assert same.covered and same.rule == "terms"
    best_english = coverage_assess(message="Как включить тёмную тему виджета?", language="ru", dense=0.5,
                                   articles=[WIDGET, WIDGET_RU], cuts=CUTS)
    assert not best_english.covered and best_english.rule == "dense_only"  # the best article decides the language
    strong = coverage_assess(message="Billing invoices", language="en", dense=0.99, articles=[WIDGET],
                             cuts=CUTS.model_copy(update={"dense_high": 0.95}))
    assert strong.covered and strong.rule == "dense_high"


def test_a_word_of_a_staff_synonym_group_is_found_when_an_article_holds_another_word_of_its_group():
    article = "Загрузите PDF в базу знаний в админке: файл обрабатывается в фоне."
    strict = CUTS.model_copy(update={"terms_min": 0.8})
    message = "Как залить PDF в базу знаний?"
    alone = coverage_assess(message=message, language="ru", dense=0.8, articles=[article], cuts=strict)
    assert not alone.covered and alone.missing == ["залить"]
    group = frozenset(term_stems("залить, загрузить"))
    widened = coverage_assess(message=message, language="ru", dense=0.8, articles=[article], cuts=strict,
                              synonyms=[group])
    assert widened.covered and widened.terms == 1.0 and widened.missing == []
    # A group none of whose words the articles hold finds nothing.
    other = coverage_assess(message=message, language="ru", dense=0.8, articles=[article], cuts=strict,
                            synonyms=[frozenset(term_stems("залить, налить"))])
    assert not other.covered and other.missing == ["залить"]


def test_technical_names_are_settings_commands_options_and_code():
    assert names_of("What's the default vacuum_freeze_min_age?") == ["vacuum_freeze_min_age"]
    assert names_of("With pg_dump, can I use --exclude-table-data and `VACUUM FULL`?") == [
        "pg_dump", "--exclude-table-data", "vacuum full"]
    assert names_of("Wi-Fi, the X-API-Key header, 8 kB, e-mail") == []


def test_a_setting_no_article_names_is_not_covered_a_customer_s_own_name_does_not_count():
    vacuum = ("VACUUM reclaims storage. FREEZE selects aggressive freezing of tuples; the autovacuum_freeze_max_age "
              "setting sets the age at which a table is vacuumed to prevent wraparound, and "
              "vacuum_multixact_freeze_min_age the age below which multixacts are kept.")
    other = coverage_assess(message="What's the default vacuum_freeze_min_age?", language="en", dense=0.99,
                            articles=[vacuum], cuts=CUTS.model_copy(update={"dense_high": 0.95}))
    assert not other.covered and other.rule == "names" and other.names_missing == ["vacuum_freeze_min_age"]
    named = coverage_assess(message="What's the default autovacuum_freeze_max_age?", language="en", dense=0.99,
                            articles=[vacuum], cuts=CUTS.model_copy(update={"dense_high": 0.95}))
    assert named.covered and named.names_missing == []
    # The customer's own table: a word the articles never use; the question's other words decide.
    own = coverage_assess(message="Does VACUUM FREEZE lock my table orders_archive?", language="en", dense=0.8,
                          articles=[vacuum], cuts=CUTS)
    assert own.names_missing == [] and own.rule == "terms"
    across = coverage_assess(message="Какое значение vacuum_freeze_min_age по умолчанию?", language="ru", dense=0.9,
                             articles=[vacuum], cuts=CUTS)
    assert not across.covered and across.rule == "names"  # names compare in any language


def test_a_name_is_held_whole_not_inside_a_longer_one():
    locks = ("deadlock_timeout (integer): the amount of time to wait on a lock before checking for a deadlock. "
             "The default is one second (1s).")
    cuts = CUTS.model_copy(update={"dense_high": 0.95})
    other = coverage_assess(message="What's the default lock_timeout in Postgres 15?", language="en", dense=0.99,
                            articles=[locks], cuts=cuts)
    assert not other.covered and other.rule == "names" and other.names_missing == ["lock_timeout"]
    named = coverage_assess(message="What's the default deadlock_timeout?", language="en", dense=0.99,
                            articles=[locks], cuts=cuts)
    assert named.covered and named.names_missing == []
    assert name_held("pg_dump", "run pg_dump, then pg_restore") and not name_held("pg_dump", "run pg_dumpall")
    assert name_held("--jobs", "pg_dump --jobs 4") and not name_held("vacuum_freeze_max_age",
                                                                     "autovacuum_freeze_max_age is 200 million")


def test_a_tool_of_the_articles_name_family_that_none_of_them_names_is_not_covered():
    backup = ("pg_dump writes a database to a script or an archive; pg_restore loads an archive. "
              "pg_ctl starts and stops the server.")
    cuts = CUTS.model_copy(update={"dense_high": 0.95})
    other = coverage_assess(message="How do I move a cluster to version 15 with pg_upgrade?", language="en",
                            dense=0.99, articles=[backup], cuts=cuts)
    assert not other.covered and other.rule == "names" and other.names_missing == ["pg_upgrade"]
    named = coverage_assess(message="Can pg_restore load a pg_dump archive?", language="en", dense=0.99,
                            articles=[backup], cuts=cuts)
    assert named.covered and named.names_missing == []
    # One name with that first part is no family: the customer's "pg_orders" table next to an article naming
    # pg_dump alone says nothing about coverage.
    single = coverage_assess(message="Does pg_dump lock my table pg_orders?", language="en", dense=0.99,
                             articles=["pg_dump writes a database to a script; it does not lock the tables."],
                             cuts=cuts)
    assert single.covered and single.names_missing == []


def test_sub_queries_in_the_articles_language_stand_for_a_message_in_another():
    port = "port (integer): the TCP port the server listens on; 5432 by default."
    message = "Какой порт PostgreSQL слушает по умолчанию?"
    alone = coverage_assess(message=message, language="ru", dense=0.13, articles=[port], cuts=CUTS)
    assert not alone.covered and alone.rule == "dense_only"
    through = coverage_assess(message=message, language="ru", dense=0.13, articles=[port], cuts=CUTS,
                              translations=[(message, 0.13), ("default server port", 0.9)])
    assert through.covered and through.rule == "translated" and through.dense == 0.13  # the message's own figure
    # Sub-queries whose words the articles do not hold, too far, too short, or in the message's language: not enough.
    for translations in ([("port for logical replication slots", 0.9)], [("default server port", 0.2)],
                         [("port", 0.99)], [("порт по умолчанию", 0.99)]):
        refused = coverage_assess(message=message, language="ru", dense=0.13, articles=[port], cuts=CUTS,
                                  translations=translations)
        assert not refused.covered and refused.rule == "dense_only", translations
    # A message whose own check decides is not looked at again.
    english = coverage_assess(message="My invoices page shows error 500 since yesterday", language="en", dense=0.8,
                              articles=[WIDGET], cuts=CUTS, translations=[("widget script tag page", 0.99)])
    assert not english.covered and english.rule == "terms"


@pytest.mark.django_db
def test_calibrate_coverage_prints_cut_points_fitted_apart_from_the_held_out_part(tmp_path, settings):
    from retrieval.ingestion import kb_ingest_paths

    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "widget.md").write_text("# Widget\n\n" + WIDGET, encoding="utf-8")
    (folder / "keys.md").write_text("# API keys\n\nStaff create API keys in the admin; a key is shown only once.",
                                    encoding="utf-8")
    kb_ingest_paths(paths=[str(folder)])
    rows = [
        {"text": "How do I turn on the dark theme of the widget?", "expected_action": "normal",
         "expected_article": "widget", "split": "dev"},
        {"text": "Where do staff create API keys?", "expected_action": "normal", "expected_article": "keys",
         "split": "dev"},
        {"text": "How do I get a refund for my annual subscription?", "expected_action": "no_answer", "split": "dev"},
        {"text": "Do you support single sign-on with Okta?", "expected_action": "no_answer", "split": "dev"},
        {"text": "Can the widget script tag go on any page?", "expected_action": "normal",
         "expected_article": "widget", "split": "held_out"},
        {"text": "What does the Pro plan cost per month?", "expected_action": "no_answer", "split": "held_out"},
        {"text": "Buy cheap watches", "expected_action": "block"},  # neither: skipped
    ]
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    out = io.StringIO()
    call_command("calibrate_coverage", questions=[questions], no_progress=True, stdout=out)
    text = out.getvalue()
    assert "questions: 4 to fit, 2 held out" in text
    fitted = text.split("fitted:")[1]
    assert "covered kept 100.0% of 2" in fitted.splitlines()[1] and "uncovered passed   0.0% of 2" in fitted
    assert "held-out part" in fitted and "ANSWER_COVERAGE_TERMS_MIN=" in text

    only_covered = tmp_path / "c.jsonl"
    only_covered.write_text(json.dumps(rows[0]), encoding="utf-8")
    with pytest.raises(CommandError, match="covered and uncovered"):
        call_command("calibrate_coverage", questions=[only_covered], no_progress=True, stdout=io.StringIO())
