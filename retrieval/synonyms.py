"""Search synonyms: staff-edited groups of words that full-text search counts as one term.

A vocabulary gap is where full text fails and a close embedding cannot make up
for it: "How much power does it use when idle?" against an article saying "0.5 W in
standby" (docs/benchmarks.md, "Search synonyms"). The ranking query
(``retrieval.search.text_ranking_sql``) widens a question's lexeme to its group
and weighs the group by the chunks holding any of its words, so neither word
outranks the other.
"""

from __future__ import annotations

from django.db import connection

from retrieval.errors import Rejected
from retrieval.language import ts_config_for
from retrieval.models import SearchSynonym
from retrieval.terms import term_stems
from sgr.cache import content_cached


class SynonymRejected(Rejected):
    """A group that cannot be saved."""


def group_words(words: str) -> list[str]:
    """A group's comma-separated words, stripped, in order."""
    return [word.strip() for word in words.split(",") if word.strip()]


def synonym_lexemes(*, words: str, ts_config: str) -> dict[str, str]:
    """The comma-separated ``words`` as the search stems them in ``ts_config``: each lexeme with the first
    word that gave it, in order.

    Each entry must be one word the configuration keeps: a phrase or a stop word
    ("the", "e-mail", which Postgres splits) has no single lexeme to widen.
    """
    entries = group_words(words)
    with connection.cursor() as cursor:
        cursor.execute("SELECT e.word, tsvector_to_array(to_tsvector(%s::regconfig, lower(e.word))) "
                       "FROM unnest(%s::text[]) WITH ORDINALITY AS e(word, position) ORDER BY e.position",
                       [ts_config, entries])
        rows = cursor.fetchall()
    lexemes: dict[str, str] = {}
    for word, stems in rows:
        if len(stems) != 1:
            raise SynonymRejected("synonym_error_word", word=word)
        lexemes.setdefault(stems[0], word)
    if len(lexemes) < 2:
        raise SynonymRejected("synonym_error_too_few")
    return lexemes


def synonym_group_prepare(group: SearchSynonym) -> None:
    """Set ``group``'s configuration and lexemes from its words; refuse a word another enabled group of the
    language already holds (a lexeme widens to one group)."""
    group.ts_config = ts_config_for(group.language)
    words = synonym_lexemes(words=group.words, ts_config=group.ts_config)
    group.lexemes = list(words)
    if not group.enabled:
        return
    other = (SearchSynonym.objects.filter(enabled=True, ts_config=group.ts_config, lexemes__overlap=group.lexemes)
             .exclude(pk=group.pk).first())
    if other is not None:
        shared = next(lexeme for lexeme in group.lexemes if lexeme in other.lexemes)
        raise SynonymRejected("synonym_error_overlap", word=words[shared], group=other.words)


SYNONYM_STEMS_SNAPSHOT = "retrieval:synonym-stems"


def synonym_stem_groups(language: str) -> list[frozenset[str]]:
    """The enabled groups of ``language`` as ``retrieval.terms`` stems them: what the coverage check counts
    as one word (the customer's "залить" held by an article saying "загрузить"). Read once per process and
    staff-content generation (``sgr.cache``, like templates and guard rules): the check runs on every turn,
    and an edit in the admin reaches every process's next check."""
    return content_cached(SYNONYM_STEMS_SNAPSHOT, _stem_groups_load).get(language, [])


def _stem_groups_load() -> dict[str, list[frozenset[str]]]:
    groups: dict[str, list[frozenset[str]]] = {}
    for language, words in SearchSynonym.objects.filter(enabled=True).values_list("language", "words"):
        stems = frozenset(stem for word in group_words(words) for stem in term_stems(word))
        if len(stems) > 1:
            groups.setdefault(language, []).append(stems)
    return groups
