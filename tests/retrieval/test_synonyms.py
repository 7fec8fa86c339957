"""Search synonyms: a question's word widened to its staff-edited group in full-text search."""

from __future__ import annotations

import pytest
from django.db import connection

from retrieval.ingestion import kb_ingest_paths
from retrieval.models import SearchSynonym
from retrieval.search import chunk_search_hybrid
from retrieval.synonyms import SynonymRejected, synonym_group_prepare, synonym_lexemes

pytestmark = pytest.mark.django_db

LAMP_KB = {
    "specs.md": "# Lamp technical data\n\nThe lamp draws 0.5 W in standby.\n",
    "firmware.md": "# Lamp firmware\n\nUpdates install at night while the lamp is idle.\n",
    "battery.md": "# Lamp battery\n\nThe lamp runs for ten hours in normal use.\n",
}
QUESTION = "How much power does the lamp use when idle?"


def _text_scores(query: str) -> dict[str, float]:
    return {hit.source.rsplit("/", 1)[-1]: hit.text_score for hit in chunk_search_hybrid(query, k=10, mode="text")}


def test_the_shipped_groups_are_stemmed_one_lexeme_per_word():
    groups = list(SearchSynonym.objects.all())
    assert {g.language for g in groups} == {"en", "ru"}
    for group in groups:
        assert group.enabled and group.ts_config in ("english", "russian")
        assert group.lexemes == list(synonym_lexemes(words=group.words, ts_config=group.ts_config)), group.words
        assert len(group.lexemes) == len(group.words.split(",")), group.words


def test_a_word_is_widened_to_its_group_and_the_group_weighs_as_one_term(stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files(LAMP_KB))])
    SearchSynonym.objects.filter(words="idle, standby").update(enabled=False)
    without = _text_scores(QUESTION)
    assert without["specs.md"] < without["firmware.md"]  # it shares only "lamp" with the question

    SearchSynonym.objects.filter(words="idle, standby").update(enabled=True)
    widened = _text_scores(QUESTION)
    # "standby" now counts as "idle", with one weight for the group: the two articles tie on full text,
    # so the dense side decides between them in the hybrid.
    assert widened["specs.md"] == pytest.approx(widened["firmware.md"])
    assert widened["specs.md"] > without["specs.md"]
    # The other direction too; a question without a grouped word is untouched.
    from_standby = _text_scores("lamp standby")
    assert from_standby["firmware.md"] == pytest.approx(from_standby["specs.md"])
    assert from_standby["firmware.md"] > from_standby["battery.md"]
    assert _text_scores("lamp normal use")["specs.md"] < _text_scores("lamp normal use")["battery.md"]


def test_a_group_of_another_language_is_not_applied(stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files(LAMP_KB))])
    SearchSynonym.objects.all().delete()
    russian = SearchSynonym(language="ru", words="idle, standby")
    synonym_group_prepare(russian)
    russian.save()
    assert russian.ts_config == "russian"
    scores = _text_scores(QUESTION)
    assert scores["specs.md"] < scores["firmware.md"]


@pytest.mark.parametrize(("words", "key"), [
    ("idle", "synonym_error_too_few"),
    ("idle, idling", "synonym_error_too_few"),  # one stem
    ("idle, in standby mode", "synonym_error_word"),
    ("the, a", "synonym_error_word"),
    ("idle, sleeping", "synonym_error_overlap"),  # "idle" is in the shipped group
])
def test_a_group_that_cannot_work_is_refused_with_its_reason(words, key):
    with pytest.raises(SynonymRejected) as caught:
        synonym_group_prepare(SearchSynonym(language="en", words=words))
    assert caught.value.key == key


def test_staff_add_a_group_in_the_admin_and_the_next_search_uses_it(admin_client, stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files({"noise.md": "# Lamp noise\n\nA quiet hum is normal.\n"}))])
    assert "noise.md" not in _text_scores("buzzing")

    response = admin_client.post("/admin/retrieval/searchsynonym/add/",
                                 {"language": "en", "words": "hum, buzzing", "enabled": "on"})
    assert response.status_code == 302
    group = SearchSynonym.objects.get(words="hum, buzzing")
    assert group.ts_config == "english" and group.lexemes == ["hum", "buzz"]
    assert "noise.md" in _text_scores("buzzing")

    listing = admin_client.get("/admin/retrieval/searchsynonym/").content.decode()
    assert "hum, buzz" in listing  # the stems column


def test_the_admin_explains_a_refused_group_in_the_staff_language(admin_client):
    response = admin_client.post("/admin/retrieval/searchsynonym/add/",
                                 {"language": "en", "words": "standby, sleep", "enabled": "on"},
                                 HTTP_ACCEPT_LANGUAGE="ru")
    assert response.status_code == 200
    assert "«standby» уже есть в группе «idle, standby»" in response.content.decode()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM retrieval_searchsynonym WHERE words = 'standby, sleep'")
        assert cursor.fetchone()[0] == 0


def test_the_coverage_check_reads_the_enabled_groups_as_stems_and_sees_an_edit_at_once():
    from retrieval import synonyms
    from retrieval.terms import term_stems
    from sgr import cache

    shipped = synonyms.synonym_stem_groups("ru")
    assert frozenset(term_stems("возврат, возмещение")) in shipped
    loads = []
    original = synonyms._stem_groups_load
    synonyms._stem_groups_load = lambda: loads.append(1) or original()
    try:
        assert synonyms.synonym_stem_groups("ru") == shipped and loads == []  # the snapshot, no query
        SearchSynonym.objects.create(language="ru", words="залить, загрузить")  # as the admin saves it
        SearchSynonym.objects.create(language="ru", words="выгрузить, экспортировать", enabled=False)
        fresh = synonyms.synonym_stem_groups("ru")
        assert loads == [1]  # the edit made every process's snapshot stale
        assert frozenset(term_stems("залить, загрузить")) in fresh
        assert frozenset(term_stems("выгрузить, экспортировать")) not in fresh  # disabled
        assert all(group not in fresh for group in synonyms.synonym_stem_groups("en"))  # by language
        SearchSynonym.objects.filter(words="залить, загрузить").get().delete()
        assert frozenset(term_stems("залить, загрузить")) not in synonyms.synonym_stem_groups("ru")
    finally:
        synonyms._stem_groups_load = original
        cache.content_changed()  # the test's rows are rolled back: no snapshot keeps them
