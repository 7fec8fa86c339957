"""Grounding, sentence by sentence, on article texts alone (no database): values on the right line."""

from __future__ import annotations

from supportdesk.pipeline.answer.grounding import answer_ground, values_of
from supportdesk.pipeline.answer.trust import grounding_fails

LIMITS = ("Table K.1. PostgreSQL Limitations\nItem | Upper Limit | Comment\n"
          "columns per table | 1,600 | further limited by tuple size fitting on a single page\n"
          "columns in a result set | 1,664\nidentifier length | 63 bytes | can be increased by recompiling PostgreSQL")
KEYS = "Send POST /api/v1/ask with the header `X-API-Key` and a JSON body. Use `--prune` to remove deleted files."
RU = "Если соединение обрывается, виджет переподключается и запрашивает события после последнего увиденного."


def _ground(text: str, language: str = "en", *, question: str = "", named: tuple[str, ...] = (), **articles: str):
    numbered = {int(k[1:]): v for k, v in articles.items()}
    return answer_ground(text=text, articles=numbered, language=language, terms_min=0.5, question=question,
                         named=named)


def test_values_are_numbers_with_units_code_and_identifiers():
    assert values_of("Up to 1,600 columns; set `wait` or LLM_BASE_URL, run with --prune, 32 TB.") == [
        "1,600 columns", "32 tb", "wait", "LLM_BASE_URL", "--prune"]


def test_a_value_must_stand_on_the_line_of_the_words_it_answers():
    right = _ground("A table can have at most 1,600 columns [1].", a1=LIMITS)
    assert right.sentences[0].status == "supported" and right.text == "A table can have at most 1,600 columns [1]."
    neighbour = _ground("A table can have at most 1,664 columns [1].", a1=LIMITS)  # the next row's value
    assert neighbour.sentences[0].status == "unsupported" and neighbour.text == ""
    assert neighbour.sentences[0].missing_values == ["1,664 columns"]
    part = _ground("The identifier length limit is 64 bytes [1].", a1=LIMITS)  # "64" is inside "1,664" only
    assert part.sentences[0].status == "unsupported"
    invented = _ground("This can be increased up to 999 hours [1].", a1=LIMITS)
    assert invented.sentences[0].status == "unsupported"


def test_citations_move_to_the_supporting_article_and_neutral_sentences_stay():
    grounding = _ground("Put the key in the X-API-Key header [1]. A table holds up to 1,600 columns. Hope this helps!",
                        a1=LIMITS, a2=KEYS)
    assert [s.status for s in grounding.sentences] == ["supported", "supported", "neutral"]
    assert [s.citation for s in grounding.sentences] == [2, 1, None]
    assert grounding.text == ("Put the key in the X-API-Key header [2]. A table holds up to 1,600 columns [1]. "
                              "Hope this helps!")
    assert grounding.supported_share == 1.0


def test_sentences_without_values_need_most_of_their_words_in_the_article():
    grounding = _ground("Run ingest with --prune to remove deleted files [2]. Contact your hosting provider [2].",
                        a2=KEYS)
    assert [s.status for s in grounding.sentences] == ["supported", "unsupported"]
    assert grounding.supported_share == 0.5 and grounding.text == "Run ingest with --prune to remove deleted files [2]."


def test_across_languages_only_the_values_are_checked():
    same = _ground("Виджет переподключается и запрашивает пропущенные события [1].", "ru", a1=RU)
    assert same.sentences[0].status == "supported"
    across = _ground("Максимальная длина идентификатора — 63 байта [1].", "ru", a1=LIMITS)
    assert across.sentences[0].status == "unverified" and across.sentences[0].citation == 1
    assert across.supported_share is None  # nothing could be checked word by word
    wrong = _ground("Максимальная длина — 64 байта [1].", "ru", a1=LIMITS)
    assert wrong.sentences[0].status == "unsupported"


def test_list_items_stay_on_their_own_lines():
    grounding = _ground("Steps:\n- Click Forgot password [1].\n- The reset link is valid for 30 minutes [1].",
                        a1="To reset your password, click Forgot password; the reset link is valid for 30 minutes.")
    assert grounding.text == "- Click Forgot password [1].\n- The reset link is valid for 30 minutes [1]."


def test_a_setting_and_its_value_must_stand_on_one_definition():
    docs = ("autovacuum_vacuum_threshold ( integer ): Specifies the minimum number of updated or deleted tuples "
            "needed to trigger a VACUUM. The default is 50 tuples.\n"
            "autovacuum_vacuum_insert_threshold ( integer ): Specifies the number of inserted tuples needed to "
            "trigger a VACUUM. The default is 1000 tuples.")
    right = _ground("The default autovacuum_vacuum_threshold is 50 tuples [1].", a1=docs)
    assert right.sentences[0].status == "supported"
    swapped = _ground("The default autovacuum_vacuum_threshold is 1000 tuples [1].", a1=docs)
    assert swapped.sentences[0].status == "unsupported"


def test_in_a_table_row_a_value_needs_its_unit_in_its_own_cell_not_in_another_value_s():
    plans = "Plan: Business | Seats: 25 | Storage (GB): 40 | Price: 49 EUR\nPlan: Team | Seats: 5 | Storage (GB): 10 | Price: 12 EUR"
    assert _ground("The Business plan costs 49 EUR a month [1].", a1=plans).sentences[0].status == "supported"
    # 25 is on the Business row, and so is EUR, but EUR is the price's: the seats' number is not a price.
    wrong_column = _ground("The Business plan costs 25 EUR a month [1].", a1=plans)
    assert wrong_column.sentences[0].status == "unsupported" and wrong_column.sentences[0].missing_values == ["25 eur"]
    # A unit named by the column's header stands in the value's own cell.
    assert _ground("The Business plan has 40 GB of storage [1].", a1=plans).sentences[0].status == "supported"
    # The Team row holds "10 GB" and the column names "plan" and "storage", as every row does; only its own
    # words ("Team") tell it from the Business row, and the sentence has none of them.
    assert _ground("The Business plan has 10 GB of storage [1].", a1=plans).sentences[0].status == "unsupported"


def test_a_table_row_s_item_named_by_the_sentence_is_enough_words_for_its_value():
    types = ("8.1. Numeric Types\n"
             "Name: smallint | Storage Size: 2 bytes | Description: small-range integer | Range: -32768 to +32767\n"
             "Name: integer | Storage Size: 4 bytes | Description: typical choice for integer | Range: -2147483648 to +2147483647\n"
             "Name: bigint | Storage Size: 8 bytes | Description: large-range integer | Range: -9223372036854775808 to +9223372036854775807")
    # "bigint" is the article's word too, so two of the sentence's words are wanted; the integer row holds one,
    # its own item: the row the value is read from is the one the sentence names.
    right = _ground("The largest value an integer can hold is 2,147,483,647; beyond it use bigint [1].", a1=types)
    assert right.sentences[0].status == "supported"
    neighbour = _ground("The largest value a smallint can hold is 2,147,483,647; beyond it use bigint [1].", a1=types)
    assert neighbour.sentences[0].status == "unsupported"  # the integer row's value, said of smallint
    assert neighbour.sentences[0].missing_values == ["2,147,483,647"]


def test_a_value_from_the_row_next_to_the_one_the_sentence_names_is_not_supported():
    limits = ("Item | Upper Limit | Comment\n"
              "Item: columns per table | Upper Limit: 1,600 | Comment: further limited by tuple size\n"
              "Item: columns per index | Upper Limit: 32 | Comment: can be increased by recompiling PostgreSQL")
    # "columns" and "PostgreSQL" are on the index row too; the sentence names all of the table row's item.
    neighbour = _ground("The hard maximum number of columns a PostgreSQL table can have is 32 [1].", a1=limits)
    assert neighbour.sentences[0].status == "unsupported" and neighbour.sentences[0].missing_values == ["32"]
    right = _ground("The hard maximum number of columns a PostgreSQL table can have is 1,600 [1].", a1=limits)
    assert right.sentences[0].status == "supported"
    index = _ground("A PostgreSQL index can have at most 32 columns [1].", a1=limits)
    assert index.sentences[0].status == "supported"
    # Nor is a number of a compound in a paragraph about tables ("a 32-bit OID") a limit of 32; the compound itself is.
    oid = limits + ("\nEach table can store a theoretical maximum of 2^32 out-of-line values. This limit arises from the "
                    "use of a 32-bit OID to identify each such value.")
    assert _ground("The hard maximum number of columns a PostgreSQL table can have is 32 [1].",
                   a1=oid).sentences[0].status == "unsupported"
    compound = _ground("Each out-of-line value of a table is identified by a 32-bit OID [1].", a1=oid).sentences[0]
    assert compound.status == "supported" and compound.values == ["32-bit"]
    wal = "max_wal_size (integer): Maximum size to let the WAL grow during automatic checkpoints. The default is 1 GB."
    ordinal = _ground("max_wal_size по умолчанию в 15-й версии равно 1 GB [1].", "ru",
                      question="Какое значение max_wal_size по умолчанию в 15-й версии?", a1=wal)
    assert ordinal.sentences[0].status == "unverified"  # "15-й" is an ordinal the customer gave, not a compound
    # Naming both rows' items whole, the sentence may take either row's value.
    both = _ground("Columns per index are capped at 32, far below the columns per table [1].", a1=limits)
    assert both.sentences[0].status == "supported"


def test_a_figure_on_another_setting_s_definition_is_not_the_asked_setting_s():
    resource = ("maintenance_work_mem ( integer ): Specifies the maximum amount of memory to be used by maintenance "
                "operations. It defaults to 64 megabytes ( 64MB ). VACUUM is only able to utilize up to a maximum of 1GB "
                "of memory.\n\n"
                "autovacuum_work_mem ( integer ): Specifies the maximum amount of memory to be used by each autovacuum "
                "worker process. It defaults to -1, indicating that the value of maintenance_work_mem should be used "
                "instead. The setting has no effect on the behavior of VACUUM when run in other contexts.")
    # "-1" is not the "1" of maintenance_work_mem's own "1GB".
    answer = "It defaults to -1, indicating that the value of maintenance_work_mem should be used instead [1]."
    asked = _ground(answer, question="default maintenance_work_mem in pg 15?", named=("maintenance_work_mem",),
                    a1=resource)
    assert asked.sentences[0].status == "unsupported" and asked.text == ""
    own = _ground(answer, question="default autovacuum_work_mem in pg 15?", named=("autovacuum_work_mem",), a1=resource)
    assert own.sentences[0].status == "supported"


def test_a_quoted_article_line_is_one_sentence_and_keeps_its_own_paragraph():
    quoted = "> columns per table | 1,600 | further limited by tuple size fitting on a single page. Really [1]"
    grounding = _ground(f"{quoted}\nSo a table can have at most 1,600 columns [1].", a1=LIMITS)
    assert [s.status for s in grounding.sentences] == ["supported", "supported"]  # the quote was not split at ". "
    assert grounding.text == f"{quoted}\n\nSo a table can have at most 1,600 columns [1]."
    wrong = _ground(f"{quoted}\nSo a table can have at most 1,664 columns [1]. Hope this helps!", a1=LIMITS)
    assert wrong.text == f"{quoted}\n\nHope this helps!"  # the neighbouring row's value dropped, the quote kept


def test_a_short_acronym_is_prose_and_a_setting_in_capitals_a_value():
    assert values_of("Add the tag to your HTML file; set PGCTLTIMEOUT or LLM_BASE_URL, then run VACUUM.") == [
        "PGCTLTIMEOUT", "LLM_BASE_URL", "VACUUM"]
    article = "Add the widget to any page with one tag: `<script src=\"/static/widget.js\" defer></script>`."
    grounding = _ground("To embed the widget, add this script tag to your HTML page: "
                        "`<script src=\"/static/widget.js\" defer></script>` [1].", a1=article)
    assert grounding.sentences[0].status == "supported"  # "HTML" is not on the article's line, and need not be


def test_a_compound_of_ordinary_words_is_prose_not_a_value():
    assert values_of("Remove knowledge-base documents with `--prune` after a built-in sign-in check.") == ["--prune"]
    article = ("Run `manage.py ingest_kb PATH` with files or folders; unchanged files are skipped, and `--prune` "
               "removes documents whose file was deleted.")
    grounding = _ground("To remove knowledge-base documents whose files were deleted, run `manage.py ingest_kb` "
                        "with `--prune` [1].", a1=article)
    assert grounding.sentences[0].status == "supported" and grounding.sentences[0].values == [
        "manage.py ingest_kb", "--prune"]


NUMERIC = ("8.1. Numeric Types\n"
           "The maximum precision that can be specified in a numeric declaration is 1000. An unconstrained numeric "
           "column is subject to the limits of the table.\n"
           "checkpoint_timeout (integer): Maximum time between automatic WAL checkpoints. The valid range is between "
           "30 seconds and one day. The default is five minutes (5min).")


def test_a_number_answers_the_words_of_its_own_sentence_not_the_next_ones():
    # "1000" and "column" share a paragraph, not a sentence: the paragraph does not say a column's maximum is 1000.
    wrong = _ground("The maximum number of columns a table can have is 1000 [1].", a1=NUMERIC)
    assert wrong.sentences[0].status == "unsupported" and wrong.sentences[0].missing_values == ["1000"]
    right = _ground("The maximum precision of a numeric declaration is 1000 [1].", a1=NUMERIC)
    assert right.sentences[0].status == "supported"


def test_a_paragraph_lends_its_first_sentence_and_the_title_names_the_subject():
    # The setting is named in the definition's first sentence, its default three sentences later.
    default = _ground("The default checkpoint_timeout is 5min [1].", a1=NUMERIC)
    assert default.sentences[0].status == "supported"
    titled = _ground("Numeric Types: the precision of a `numeric` declaration can be at most 1000 [1].", a1=NUMERIC)
    assert titled.sentences[0].status == "supported"  # `numeric` in the title and its sentence


def test_a_passage_copied_word_for_word_is_supported_and_a_repeated_sentence_shown_once():
    # Two values of two sentences: no one sentence holds both, the article holds the passage as it is.
    backups = "Backups run every 6 hours on every plan. Each copy is kept for 30 days."
    copied = _ground("> Backups run every 6 hours on every plan. Each copy is kept for 30 days. [1]", a1=backups)
    assert copied.sentences[0].status == "supported"
    changed = _ground("> Backups run every 6 hours on every plan. Each copy is kept for 60 days. [1]", a1=backups)
    assert changed.sentences[0].status == "unsupported"  # not word for word
    repeated = _ground("Put the key in the X-API-Key header [2]. Put the key in the X-API-Key header [2].", a2=KEYS)
    assert [s.status for s in repeated.sentences] == ["supported", "supported"]
    assert repeated.text == "Put the key in the X-API-Key header [2]."


def test_an_answer_whose_supported_sentences_answer_another_question_fails():
    asked = "What is the maximum number of columns a table can have?"
    # The wrong value is dropped; what is left is supported but says nothing about columns or tables.
    left = _ground("The maximum number of columns a table can have is 1000 [1]. This is specified in the article [1].",
                   a1=NUMERIC + "\nThis is specified in the article about numeric types.")
    assert [s.status for s in left.sentences] == ["unsupported", "supported"] and left.supported_share == 0.5
    assert grounding_fails(left, question=asked, language="en")
    answered = _ground("A table can have at most 1,600 columns [1].", a1=LIMITS)
    assert not grounding_fails(answered, question=asked, language="en")
    # An answer with nothing in the customer's language is the articles' lines copied, not an answer to them.
    assert grounding_fails(answered, question="Сколько столбцов может быть в таблице?", language="ru")
    russian = _ground("В таблице может быть не больше 1,600 столбцов [1].", "ru", a1=LIMITS)
    assert [s.status for s in russian.sentences] == ["unverified"]
    assert not grounding_fails(russian, question="Сколько столбцов может быть в таблице?", language="ru")


def test_an_answer_in_the_customer_s_language_is_told_by_its_words_not_its_setting_names():
    wal = "max_wal_senders (integer): Specifies the maximum number of concurrent connections. The default is 10."
    named = _ground("max_wal_senders по умолчанию равно 10 [1].", "ru", a1=wal)
    assert not grounding_fails(named, question="Какое значение max_wal_senders по умолчанию?", language="ru")
    bare = _ground("max_wal_senders = 10 [1].", "ru", a1=wal)  # no words at all: not counted against it
    assert not grounding_fails(bare, question="Какое значение max_wal_senders по умолчанию?", language="ru")
    copied = _ground("max_wal_senders (integer): Specifies the maximum number of concurrent connections [1].", "ru", a1=wal)
    assert copied.sentences[0].status == "supported"
    assert grounding_fails(copied, question="Какое значение max_wal_senders по умолчанию?", language="ru")


def test_a_sentence_that_stops_where_its_value_should_stand_is_not_supported():
    settings_page = "max_connections (integer): Determines the maximum number of concurrent connections. The default is 100."
    empty = _ground("The default value for `max_connections` is [1]. The default value for max_connections is 100 [1].",
                    a1=settings_page)
    assert [s.status for s in empty.sentences] == ["unsupported", "supported"]
    assert empty.text == "The default value for max_connections is 100 [1]."
    russian = _ground("Значение max_connections по умолчанию составляет [1].", "ru",
                      a1="max_connections: наибольшее число соединений. По умолчанию 100.")
    assert russian.sentences[0].status == "unsupported"


def test_a_question_echoed_back_states_nothing_and_the_answer_fails():
    asked = "В каком заголовке передавать API-ключ?"
    echoed = _ground("В каком заголовке передавать API-ключ [1]?", "ru", a1="Ключ передают в заголовке X-API-Key.")
    assert [s.status for s in echoed.sentences] == ["neutral"]
    assert grounding_fails(echoed, question=asked, language="ru")
    answered = _ground("Передавайте ключ в заголовке X-API-Key [1]. Остались вопросы?", "ru",
                       a1="Ключ передают в заголовке X-API-Key.")
    assert [s.status for s in answered.sentences] == ["supported", "neutral"]  # a closing question stays
    assert not grounding_fails(answered, question=asked, language="ru")


def test_the_question_affirmed_with_a_word_no_article_holds_is_not_supported():
    records = ("Plan records\nEvery customer turn creates one plan record: the validated plan, the guardian's verdict "
               "and the routing decision. Analysts query plan records through the analyst API.")
    question = "Is there a webhook that fires every time a plan record is created?"
    affirmed = answer_ground(text="Yes, there is a webhook that fires every time a plan record is created [1].",
                             articles={1: records}, language="en", terms_min=0.5, question=question)
    assert affirmed.sentences[0].status == "unsupported" and affirmed.text == ""
    # Without the question the same sentence passes: "plan", "record" and "created" are in the article.
    assert answer_ground(text="Yes, there is a webhook that fires every time a plan record is created [1].",
                         articles={1: records}, language="en", terms_min=0.5).sentences[0].status == "supported"
    # What the article states, in the question's words, stays supported: every word is the article's.
    stated = answer_ground(text="Every customer turn creates one plan record [1].", articles={1: records},
                           language="en", terms_min=0.5, question="Is a plan record created for every customer turn?")
    assert stated.sentences[0].status == "supported"


def test_the_quoted_line_says_more_than_the_question_not_the_article_title(settings):
    from supportdesk.pipeline.answer.kb import KbResult, KbSource
    from supportdesk.pipeline.answer.trust import quote_best

    settings.ANSWER_GROUNDING_QUOTE = True
    article = ("Password reset\n# Password reset\n\nTo reset your password, click Forgot password on the sign-in page; "
               "the reset link is valid for 30 minutes.")
    search = KbResult(query="", texts={1: article}, sources=[KbSource(number=1, title="Password reset")])
    line, source = quote_best(question="How do I reset my password?", searches=[search])
    assert line.startswith("To reset your password") and source.number == 1


def test_the_quoted_line_for_a_question_asking_a_figure_states_one(settings):
    from supportdesk.pipeline.answer.kb import KbResult, KbSource
    from supportdesk.pipeline.answer.trust import quote_best

    settings.ANSWER_GROUNDING_QUOTE = True
    asked = "What's the maximum size of a PDF upload on the knowledge base uploads page?"
    article = "Uploads\nThe maximum size of a PDF upload on the knowledge base uploads page is set by staff in the admin."
    search = KbResult(query="", texts={1: article}, sources=[KbSource(number=1, title="Uploads")])
    assert quote_best(question=asked, searches=[search]) is None  # the topic's line, not the figure
    line, _ = quote_best(question="Who sets the maximum size of a PDF upload on the knowledge base uploads page?",
                         searches=[search])
    assert line.endswith("set by staff in the admin.")
    sized = KbResult(query="", texts={1: article + "\nThe maximum size of a PDF upload on the knowledge base uploads "
                                                    "page is 50 MB; larger files are refused."},
                     sources=[KbSource(number=1, title="Uploads")])
    line, _ = quote_best(question=asked, searches=[sized])
    assert "50 MB" in line


def test_the_quoted_line_names_the_setting_the_question_asks_about(settings):
    from supportdesk.pipeline.answer.kb import KbResult, KbSource
    from supportdesk.pipeline.answer.trust import quote_best

    settings.ANSWER_GROUNDING_QUOTE = True
    article = ("Automatic Vacuuming\nautovacuum_multixact_freeze_max_age (integer): the maximum age a table can reach "
               "before a VACUUM operation is forced; the default freeze age is 400 million multixacts.")
    search = KbResult(query="", texts={1: article}, sources=[KbSource(number=1, title="Automatic Vacuuming")])
    assert quote_best(question="What is the default vacuum_freeze_min_age?", searches=[search]) is None
    line, _ = quote_best(question="What is the default autovacuum_multixact_freeze_max_age?", searches=[search])
    assert line.startswith("autovacuum_multixact_freeze_max_age")
    # Without a name in the question, the same line may answer its words.
    assert quote_best(question="What is the default freeze age before a vacuum is forced?", searches=[search]) is not None
    # A name is held whole: the line on autovacuum_multixact_freeze_max_age does not name multixact_freeze_max_age.
    assert quote_best(question="What is the default multixact_freeze_max_age?", searches=[search]) is None

    # A line that names the setting in passing states another setting's figure.
    resource = ("logical_decoding_work_mem (integer): Specifies the maximum amount of memory to be used by logical "
                "decoding. It defaults to 64 megabytes (64MB). Since each replication connection only uses a single "
                "buffer of this size (as limited by max_wal_senders), it is safe to set this value higher.\n"
                "max_worker_processes (integer): Sets the maximum number of background processes. The default is 8.")
    search = KbResult(query="", texts={1: resource}, sources=[KbSource(number=1, title="Resource Consumption")])
    assert quote_best(question="What is the default for max_wal_senders in PostgreSQL 15?", searches=[search]) is None
    line, _ = quote_best(question="What is the default max_worker_processes in PostgreSQL 15?", searches=[search])
    assert line.startswith("max_worker_processes")
    # Another setting's definition that names the asked one in the sentence stating its figure gives none of its.
    autovacuum = ("autovacuum_work_mem ( integer ): Specifies the maximum amount of memory to be used by each "
                  "autovacuum worker process. It defaults to -1, indicating that the value of maintenance_work_mem "
                  "should be used instead.")
    search = KbResult(query="", texts={1: autovacuum}, sources=[KbSource(number=1, title="Resource Consumption")])
    assert quote_best(question="What is the default maintenance_work_mem?", searches=[search]) is None
    assert quote_best(question="What is the default autovacuum_work_mem?", searches=[search]) is not None
    # Named only in a later sentence, the one that states the figure, it is that sentence's subject.
    named = "Replication slots keep WAL for standbys. Their number is capped by max_replication_slots, 10 by default."
    search = KbResult(query="", texts={1: named}, sources=[KbSource(number=1, title="Replication")])
    assert quote_best(question="What is the default max_replication_slots?", searches=[search]) is not None


def test_a_bare_number_the_customer_gave_is_context_beside_a_value_of_the_sentence_s_own():
    wal = "max_wal_size (integer): Maximum size to let the WAL grow during automatic checkpoints. The default is 1 GB."
    question = "What is the default max_wal_size in PostgreSQL 15?"
    right = answer_ground(text="The default max_wal_size in PostgreSQL 15 is 1 GB [1].", articles={1: wal},
                          language="en", terms_min=0.5, question=question)
    assert right.sentences[0].status == "supported" and sorted(right.sentences[0].values) == ["1 gb", "max_wal_size"]
    across = answer_ground(text="max_wal_size по умолчанию в PostgreSQL 15 равно 1 GB [1].", articles={1: wal},
                           language="ru", terms_min=0.5, question="Какое значение max_wal_size по умолчанию в PostgreSQL 15?")
    assert across.sentences[0].status in ("supported", "unverified")  # kept: its own value is the article's
    wrong = answer_ground(text="The default max_wal_size in PostgreSQL 15 is 2 GB [1].", articles={1: wal},
                          language="en", terms_min=0.5, question=question)
    assert wrong.sentences[0].status == "unsupported"  # the value of its own is still checked
    # Said alone, the customer's number is what the sentence affirms: it must be in the article.
    seats = "| Item | Limit |\n| agents per workspace | 25 |"
    affirmed = answer_ground(text="Yes, a workspace can have 40 agents [1].", articles={1: seats}, language="en",
                             terms_min=0.5, question="Can a workspace have 40 agents?")
    assert affirmed.sentences[0].status == "unsupported"
    # An address the customer gave (their server's) is context too; the setting beside it is still checked.
    listen = ("listen_addresses (string): Specifies the TCP/IP address(es) on which the server is to listen. "
              "The special entry * corresponds to all available IP interfaces.")
    asked = "Clients on 10.0.3.7 get connection refused, what do I change?"
    theirs = answer_ground(text="Set listen_addresses to * so that clients on 10.0.3.7 can connect [1].",
                           articles={1: listen}, language="en", terms_min=0.5, question=asked)
    assert theirs.sentences[0].status == "supported"
    invented = answer_ground(text="Set listen_addresses to 0.0.0.0/8 so that clients on 10.0.3.7 can connect [1].",
                             articles={1: listen}, language="en", terms_min=0.5, question=asked)
    assert invented.sentences[0].status == "unsupported"
    # Without the question the version is a value like any other.
    plain = answer_ground(text="The default max_wal_size in PostgreSQL 15 is 1 GB [1].", articles={1: wal},
                          language="en", terms_min=0.5)
    assert plain.sentences[0].status == "unsupported"


def test_prose_that_cannot_be_compared_does_not_retract_a_value_an_article_holds():
    conn = ("max_connections (integer): Determines the maximum number of concurrent connections to the database "
            "server. The default is typically 100 connections. This parameter can only be set at server start.")
    question = "Сколько соединений max_connections по умолчанию?"
    answer = ("max_connections по умолчанию равно 100 [1]. Этот параметр задаётся только при запуске сервера. "
              "Если система его не поддерживает, соединений будет меньше.")
    grounding = answer_ground(text=answer, articles={1: conn}, language="ru", terms_min=0.5, question=question)
    assert [s.status for s in grounding.sentences] == ["unverified", "unchecked", "unchecked"]
    assert grounding.text == "max_connections по умолчанию равно 100 [1]."  # the uncheckable prose is not shown
    assert grounding.supported_share is None and not grounding_fails(grounding, question=question, language="ru")
    # Without a value an article holds, the same prose is unsupported and the answer fails.
    prose = answer_ground(text="Этот параметр задаётся только при запуске сервера. Соединений будет меньше.",
                          articles={1: conn}, language="ru", terms_min=0.5, question=question)
    assert {s.status for s in prose.sentences} == {"unsupported"} and grounding_fails(prose, question=question,
                                                                                       language="ru")


def test_a_bare_html_tag_names_its_element_and_a_tag_with_attributes_is_code():
    widget = ("Атрибуты тега script меняют виджет: `data-open=\"true\"` открывает панель сразу, а `data-api-base` "
              "направляет его на другой сервер.\nВиджет добавляется на любую страницу вашего сайта одним тегом: "
              "`<script src=\"/widget.js\" defer></script>`.")
    named = _ground("Добавьте атрибут `data-api-base` в тег `<script>` виджета [1].", language="ru", a1=widget)
    assert named.sentences[0].status == "supported" and named.sentences[0].missing_values == []
    other = _ground("Добавьте атрибут `data-api-base` в тег `<iframe>` виджета [1].", language="ru", a1=widget)
    assert other.sentences[0].status == "unsupported" and other.sentences[0].missing_values == ["<iframe>"]
    forged = _ground("Вставьте `<script src=\"https://evil.example/x.js\">` на страницу [1].", language="ru", a1=widget)
    assert forged.sentences[0].status == "unsupported"


def test_code_with_spaces_is_checked_word_by_word_and_a_placeholder_is_the_reader_s():
    keys = "Create a key from the command line: `manage.py create_api_key --name \"BI export\" --scope analyst`."
    filled = _ground("Run `manage.py create_api_key --name NAME --scope analyst` to create the key [1].", a1=keys)
    assert filled.sentences[0].status == "supported"
    named = _ground("Run `manage.py create_api_key --name SUPPORT_BOT --scope analyst` to create the key [1].", a1=keys)
    assert named.sentences[0].status == "supported"  # a flag's argument is the reader's, not a name to find whole
    wrong = _ground("Run `manage.py create_api_key --name NAME --scope admin` to create the key [1].", a1=keys)
    assert wrong.sentences[0].status == "unsupported"  # only its first word was looked for before
    assert wrong.sentences[0].missing_values == ["manage.py create_api_key --name NAME --scope admin"]
    manual = "VACUUM FULL rewrites the table: `VACUUM FULL orders` returns the space to the operating system."
    keyword = _ground("Run `VACUUM ANALYZE orders` to return the space [1].", a1=manual)
    assert keyword.sentences[0].status == "unsupported"  # a keyword in capitals is a value, not a placeholder


WIDGET = ('Add the widget to any page with one tag: `<script src="https://support.example.com/static/supportdesk/widget.js" '
          'defer></script>`. The script draws a chat button in the bottom-right corner of the page.')
TAG = '<script src="https://support.example.com/static/supportdesk/widget.js" defer></script>'


def test_a_code_block_is_kept_whole_with_its_fences_and_its_citation_after_it():
    # The README's first question: the model fenced the tag. Line by line, the opening fence was dropped and the
    # closing one kept, so the customer got "<script …> [1] ``` This script …" (a tag the sanitizer removes).
    grounding = _ground(f"Add this to your page:\n```html\n{TAG}\n```\nThe script draws a chat button in the "
                        "bottom-right corner of the page [1].", a1=WIDGET)
    assert [s.status for s in grounding.sentences] == ["supported", "supported", "supported"]
    assert grounding.text == (f"Add this to your page: [1]\n\n```html\n{TAG}\n```\n[1]\n\nThe script draws a chat "
                              "button in the bottom-right corner of the page [1].")


def test_a_code_block_with_an_invented_line_is_dropped_whole_and_an_open_fence_is_closed():
    invented = _ground(f"```html\n{TAG}\n<div id=\"supportdesk-root\" data-tenant=\"acme\"></div>\n```", a1=WIDGET)
    assert invented.sentences[0].status == "unsupported" and invented.text == ""  # never half a block
    unclosed = _ground(f"```\n{TAG}", a1=WIDGET)  # the model stopped before the closing fence
    assert unclosed.text == f"```\n{TAG}\n```\n[1]"
    assert _ground("```\n}\n```", a1=WIDGET).text == "```\n}\n```"  # nothing to check: kept, uncited
    indexed = _ground("```python\nfirst = hits[1]\n```", a1=WIDGET)  # a subscript in code is not a citation
    assert indexed.sentences[0].cited == [] and "hits[1]" in indexed.sentences[0].text


# As the manual's pages are ingested: a setting and its definition on one line.
LOCKS = ("deadlock_timeout ( integer ): This is the amount of time to wait on a lock before checking to see if there "
         "is a deadlock condition. The default is one second ( 1s ).\n"
         "maintenance_work_mem ( integer ): Specifies the maximum amount of memory to be used by maintenance "
         "operations. It defaults to 64 megabytes ( 64MB ).\n"
         "temp_buffers ( integer ): Sets the maximum amount of memory used for temporary buffers within each "
         "database session. The default is eight megabytes ( 8MB ).")


def test_a_setting_s_name_stands_whole_on_the_line_of_its_value():
    right = _ground("The default deadlock_timeout is one second (1s) [1].", a1=LOCKS)
    assert right.sentences[0].status == "supported"
    # "lock_timeout" and "work_mem" are inside the neighbouring names once spaces are folded: other settings.
    inside = _ground("The default lock_timeout is one second (1s) [1].", a1=LOCKS)
    assert inside.sentences[0].status == "unsupported" and inside.text == ""
    memory = _ground("By default `work_mem` is 64MB [1].", a1=LOCKS)
    assert memory.sentences[0].status == "unsupported"
    assert _ground("By default `maintenance_work_mem` is 64MB [1].", a1=LOCKS).sentences[0].status == "supported"
    # Across languages only the values are compared, the names still whole.
    across = _ground("По умолчанию lock_timeout равен 1s [1].", "ru", a1=LOCKS)
    assert across.sentences[0].status == "unsupported"
    assert _ground("По умолчанию deadlock_timeout равен 1s [1].", "ru", a1=LOCKS).sentences[0].status == "unverified"


def test_a_number_with_its_unit_written_on_is_a_value():
    assert values_of("The default is 8MB, checked every 5min; a 1s wait, 100ms, the 3rd row, v15.") == [
        "8 mb", "5 min", "1 s", "100 ms"]
    assert values_of("a 1.5GB file, 50% of it") == ["1.5 gb", "50 %"]  # one value each, not also a stray "1"
    assert _ground("temp_buffers defaults to 8MB [1].", a1=LOCKS).sentences[0].status == "supported"
    # Its words are all on the article's line; the value is not.
    wrong = _ground("temp_buffers defaults to 16MB [1].", a1=LOCKS)
    assert wrong.sentences[0].status == "unsupported" and wrong.sentences[0].missing_values == ["16 mb"]
    # Across languages the value is what can be checked: held, the sentence is shown; not held, it is dropped.
    assert _ground("По умолчанию temp_buffers равен 8MB [1].", "ru", a1=LOCKS).sentences[0].status == "unverified"
    assert _ground("По умолчанию temp_buffers равен 16MB [1].", "ru", a1=LOCKS).sentences[0].status == "unsupported"


def test_an_answer_that_only_repeats_its_articles_header_lines_says_nothing():
    """A small model sometimes copies the header lines it was shown ("[n] title — headings") one after another,
    without a full stop: each is in its article, none states anything, and the answer is not shown."""
    createdb = "createdb\ncreate a new PostgreSQL database\ncreatedb creates a new PostgreSQL database. Use -O to set its owner."
    widget = "Using the chat widget\nUsing the chat widget > Opening a conversation\nClick the bubble to open a conversation."
    headings = {1: ("createdb", "create a new PostgreSQL database"),
                2: ("Using the chat widget", "Using the chat widget > Opening a conversation")}
    text = ("createdb — create a new PostgreSQL database [1] Using the chat widget — Using the chat widget > "
            "Opening a conversation [2] Opening a conversation [2]")
    echoed = answer_ground(text=text, articles={1: createdb, 2: widget}, language="en", terms_min=0.5,
                           headings=headings)
    assert [s.status for s in echoed.sentences] == ["echo", "echo", "echo"]
    assert echoed.text == "" and echoed.supported_share is None
    assert grounding_fails(echoed, question="Can the chat open by itself after 30 seconds?", language="en")
    # Without the headers known, the same lines pass as the articles' own text.
    assert answer_ground(text=text, articles={1: createdb, 2: widget}, language="en", terms_min=0.5).text != ""
    # A statement beside them is kept, on its own, with its citation.
    stated = answer_ground(text="Using the chat widget > Opening a conversation [2] Click the bubble to open a "
                                "conversation [2].", articles={1: createdb, 2: widget}, language="en",
                           terms_min=0.5, headings=headings)
    assert [s.status for s in stated.sentences] == ["echo", "supported"]
    assert stated.text == "Click the bubble to open a conversation [2]."
    # A sentence that names the article's subject and says something about it is no header.
    owner = answer_ground(text="Use -O with createdb to set the database's owner [1].", articles={1: createdb},
                          language="en", terms_min=0.5, headings=headings)
    assert owner.sentences[0].status == "supported"


def test_the_customer_s_question_copied_into_the_answer_says_nothing():
    question = "Clients ask what the numbers in square brackets at the end of an answer mean. What do we tell them?"
    article = "Citations\nEach answer ends with numbers in square brackets: each one is a source the answer used."
    copied = answer_ground(text="Clients ask what the numbers in square brackets at the end of an answer mean [1]. "
                                "What do we tell them?", articles={1: article}, language="en", terms_min=0.5,
                           question=question)
    assert [s.status for s in copied.sentences] == ["echo", "neutral"]
    assert grounding_fails(copied, question=question, language="en")
    # Said in the answer's own words, the same facts are a statement.
    stated = answer_ground(text="Each number in square brackets is a source the answer used [1].",
                           articles={1: article}, language="en", terms_min=0.5, question=question)
    assert stated.sentences[0].status == "supported"


def test_a_sentence_that_only_says_what_an_article_is_about_is_no_answer():
    question = "How can analysts count blocked and answered turns?"
    records = "Reading plan records\nAnalysts query the plan records table directly: one row per turn makes it easy to " \
              "count blocked, clarified and answered turns."
    vacuum = "VACUUM\nVACUUM reclaims storage occupied by dead tuples and optionally analyzes a database."
    contents = answer_ground(text="The article provides information on how analysts can count blocked and answered "
                                  "turns [1]. The article explains the VACUUM command and its options [2]. "
                                  "Статья описывает команду VACUUM [2].",
                             articles={1: records, 2: vacuum}, language="en", terms_min=0.5, question=question)
    assert [s.status for s in contents.sentences] == ["echo", "echo", "echo"] and contents.text == ""
    # What an article says, said as a statement, is checked as one.
    says = answer_ground(text="The article explains that analysts query the plan records table directly [1].",
                         articles={1: records, 2: vacuum}, language="en", terms_min=0.5, question=question)
    assert says.sentences[0].status == "supported"


def test_a_question_for_a_figure_answered_without_one_fails():
    """The knowledge base has the topic, not the figure: each sentence is grounded, none is the answer."""
    records = ("Every customer turn produces one plan record: the validated plan, the guardian verdict and the "
               "timings of each stage. Staff find plan records in the Django admin, filtered by action or date.")
    asked = "How long are plan records kept before they're purged? Our legal team wants a retention number."
    topic = _ground("Staff find plan records in the Django admin, filtered by action or date [1].", a1=records)
    assert [s.status for s in topic.sentences] == ["supported"]
    assert grounding_fails(topic, question=asked, language="en")
    # The same sentences answer a question that asks for no figure.
    assert not grounding_fails(topic, question="Where do staff find plan records?", language="en")
    # A figure the question itself holds is no answer to it; one with its unit, or a new one, is.
    versions = _ground("In PostgreSQL 15 the limit depends on the table [1].",
                       a1="In PostgreSQL 15 the limit depends on the table.")
    assert grounding_fails(versions, question="What's the maximum size of a row in PostgreSQL 15?", language="en")
    answered = _ground("A table can have at most 1,600 columns [1].", a1=LIMITS)
    assert not grounding_fails(answered, question="Is there a maximum number of columns per table?", language="en")
    russian = _ground("Длина идентификатора — не больше 63 bytes [1].", "ru", a1=LIMITS)
    assert not grounding_fails(russian, question="Какая максимальная длина идентификатора?", language="ru")
    widget = ("Виджет создаёт разговор через API и хранит токен доступа в браузере, поэтому после перезагрузки "
              "страницы разговор продолжается.")
    lifetime = _ground("Виджет хранит токен доступа в браузере, поэтому после перезагрузки страницы разговор "
                       "продолжается [1].", "ru", a1=widget)
    assert grounding_fails(lifetime, question="Сколько живёт токен доступа разговора в браузере?", language="ru")


def test_only_a_question_that_asks_for_a_figure_and_nothing_else_needs_one():
    from supportdesk.pipeline.answer.amounts import asks_amount, states_amount

    for question in ("How many requests per minute can one key make?", "what's the max file size for an upload?",
                     "Is there a hard maximum number of columns a table can have?", "And how long is it kept?",
                     "Сколько живёт токен?", "Подскажите, какой максимальный размер PDF?",
                     "Через какое время чат начнётся заново?", "Есть ли лимит на число ключей?",
                     # A dot inside a name or a number does not end the sentence.
                     "How long does the widget on staging.ourshop.com keep its token?",
                     "How many connections can a 1.5 GB server take?"):
        assert asks_amount(question), question
    for question in ("How do I raise the limit?", "I need to count how many turns were blocked. Where is the data?",
                     "Аналитику нужно посчитать, сколько обращений заблокировано. Где брать данные?",
                     "How do I add a rule? And how long until it applies?", "What does the size option do?"):
        assert not asks_amount(question), question
    assert states_amount("The default is 5min [1].", question="I see a checkpoint every 5 minutes. What's the interval?")
    assert states_amount("Refunds take ten business days.", question="How long do refunds take?")
    assert not states_amount("PostgreSQL 15 keeps it.", question="How long does PostgreSQL 15 keep it?")
    assert states_amount("Between -1.0 and 1.0 [1].", question="What range of values does setseed accept?")
    assert not states_amount("See the limits table [2].", question="What's the limit?")  # a citation is no figure


def test_a_number_stated_across_languages_stands_with_the_questions_words_in_the_articles_language():
    """A Russian answer over an English page: its words cannot be compared, so the number must stand on a line that
    holds the question's words as the planner translated them, with its unit in any language's spelling."""
    limits = f"{LIMITS}\nfield size | 1 GB\ndatabase size | unlimited"
    asked = "Какая максимальная длина имени таблицы в постгресе?"
    topics = ["maximum identifier length for a table name"]

    def ground(text: str, with_topics: list[str]):
        return answer_ground(text=text, articles={1: limits}, language="ru", terms_min=0.5, question=asked,
                             topics=with_topics)

    wrong_row = "Максимальная длина имени таблицы — 1 ГБ [1]."
    off_row = ground(wrong_row, topics)  # "1 GB" is the field size's row: not shown, not counted (words across languages)
    assert off_row.sentences[0].status == "unchecked" and off_row.text == ""
    assert grounding_fails(off_row, question=asked, language="ru")
    assert ground(wrong_row, []).sentences[0].status == "unverified"  # without the translation: anywhere, as before
    right = ground("Максимальная длина имени — 63 bytes [1].", topics)
    assert right.sentences[0].status == "unverified" and right.sentences[0].citation == 1
    # The unit counts across languages: "1 ТБ" is not "1 GB", whatever the row.
    assert ground("Размер поля — до 1 ТБ [1].", []).sentences[0].status == "unsupported"
    assert ground("Размер поля — до 1 ГБ [1].", []).sentences[0].status == "unverified"
    # A list's mark ("1") off every line of the topic is dropped without counting against the answer.
    listed = ground("Проверьте следующее: 1 [1]. Максимальная длина имени — 63 bytes [1].", topics)
    assert [s.status for s in listed.sentences] == ["unchecked", "unverified"]
    assert listed.text == "Максимальная длина имени — 63 bytes [1]." and not grounding_fails(listed, question=asked,
                                                                                              language="ru")


def test_a_figure_answers_a_question_for_one_only_with_the_questions_words():
    """Each sentence grounded, a figure stated, but another line's: "tcp_keepalives_idle is 2 hours" for the default
    connection cap; and a reference to a table is no figure."""
    conn = ("tcp_keepalives_idle (integer): the default is 2 hours.\nmax_connections (integer): Determines the maximum "
            "number of concurrent connections to the database server. The default is typically 100 connections.\n"
            "An unconstrained numeric column is subject to the limits described in Table 8.2.")
    asked = "App keeps throwing 'too many clients already'. What's the default connection cap?"
    other = _ground("tcp_keepalives_idle is 2 hours [1]. It determines the maximum number of concurrent connections "
                    "to the database server [1].", a1=conn)
    assert [s.status for s in other.sentences] == ["supported", "supported"]
    assert grounding_fails(other, question=asked, language="en")
    answered = _ground("The default is typically 100 connections [1].", a1=conn)
    assert not grounding_fails(answered, question=asked, language="en")
    reference = _ground("An unconstrained numeric column is subject to the limits described in Table 8.2 [1].", a1=conn)
    assert grounding_fails(reference, question="What's the maximum number of columns per table?", language="en")
    # The question's words may stand in the sentence before the figure's.
    limits = _ground("There is a hard maximum number of columns per table [1]. This limit is 1,600 [1].", a1=LIMITS)
    assert not grounding_fails(limits, question="Is there a hard maximum number of columns?", language="en")
    assert grounding_fails(_ground("This limit is 1,600 [1].", a1=LIMITS),
                           question="Is there a hard maximum number of columns?", language="en")


def test_a_russian_question_is_quoted_from_the_english_page_beside_a_russian_article_that_does_not_answer(settings):
    """The planner's English sub-query finds the English page's line, though a Russian article was found too;
    of two lines as close to the words, the one saying "default" answers a question for a default ("дефолт")."""
    from supportdesk.pipeline.answer.kb import KbResult, KbSource
    from supportdesk.pipeline.answer.trust import quote_best

    settings.ANSWER_GROUNDING_QUOTE = True
    question = "подскажите дефолт deadlock_timeout, сколько сервер ждёт блокировку?"
    manual = ("Lock Management\nSET deadlock_timeout = '2s';\n"
              "deadlock_timeout (integer): the time to wait on a lock before checking for a deadlock. "
              "The default is one second (1s).")
    keys = "API-ключи\nКлюч создаётся командой create_api_key и показывается один раз."
    search = KbResult(query="", texts={1: manual, 2: keys},
                      sources=[KbSource(number=1, title="Lock Management"), KbSource(number=2, title="API-ключи")])
    # The sub-query is the setting's name alone: the example line shares as many of its words.
    line, source = quote_best(question=question, searches=[search], topics=[question, "deadlock_timeout"])
    assert source.number == 1 and line.endswith("The default is one second (1s).")
    # The Russian article is not read for the English words, and without them nothing is quoted.
    assert quote_best(question=question, searches=[search], topics=[question]) is None
    only_keys = KbResult(query="", texts={2: keys}, sources=[KbSource(number=2, title="API-ключи")])
    assert quote_best(question=question, searches=[only_keys], topics=[question, "deadlock_timeout"]) is None




def test_a_figure_for_a_named_setting_stands_on_the_line_naming_it(settings):
    """The model's sentence may take a neighbouring line's number with its words ("The default is 50 tuples",
    the vacuum threshold's, for ``autovacuum_naptime``): grounded on those words it passes; for a question asking
    a named setting's figure or default, the number must stand on the line naming the setting."""
    from supportdesk.pipeline.answer.kb import KbResult, KbSource
    from supportdesk.pipeline.answer.trust import answer_grounding

    settings.ANSWER_GROUNDING = True
    vacuum = ("Automatic Vacuuming\nautovacuum_naptime (integer): Specifies the minimum delay between autovacuum runs "
              "on any given database. The default is one minute (1min).\nautovacuum_vacuum_threshold (integer): "
              "Specifies the minimum number of updated or deleted tuples needed to trigger a VACUUM in any one table. "
              "The default is 50 tuples.")
    naptime = "How often does autovacuum_naptime let the launcher look at a database by default?"
    assert _ground("The default is 50 tuples [1].", a1=vacuum).sentences[0].status == "supported"

    def ground(text: str, question: str) -> str:
        search = KbResult(query="", texts={1: vacuum}, sources=[KbSource(number=1, title="Automatic Vacuuming")])
        return answer_grounding(text=text, searches=[search], language="en", question=question).sentences[0].status

    assert ground("The default is 50 tuples [1].", naptime) == "unsupported"
    assert ground("The default is 50 tuples [1].", "What is the default autovacuum_naptime?") == "unsupported"
    assert ground("The default is one minute (1min) [1].", naptime) == "supported"
    # Neither a figure nor a default asked, or no setting named: grounded on the sentence's words, as before.
    assert ground("The default is 50 tuples [1].", "Which autovacuum settings trigger a VACUUM?") == "supported"
    assert ground("The default is 50 tuples [1].", "How many tuples trigger a VACUUM by default?") == "supported"
    assert ground("The default is 50 tuples [1].", "What is the default of autovacuum_vacuum_threshold?") == "supported"
    # A code block's lines are checked the same way.
    assert ground("```\nThe default is 50 tuples.\n```\n[1]", naptime) == "unsupported"
    assert ground("```\nThe default is one minute (1min).\n```\n[1]", naptime) == "supported"


def test_a_number_given_to_what_another_article_is_about_is_not_supported():
    """"The guardian waits one second (1s) for its provider": every value and most words are the lock page's, but
    two of the question's words the sentence uses are the guardian article's, not the lock page's."""
    locks = ("Lock Management\ndeadlock_timeout (integer): the time to wait on a lock before checking for a deadlock. "
             "The default is one second (1s).")
    guardian = "Guardian\nThe guardian checks every message with a provider; if the provider fails, GUARD_FAIL_MODE decides."

    def status(text: str, question: str) -> str:
        return answer_ground(text=text, articles={1: locks, 2: guardian}, language="en", terms_min=0.5,
                             question=question).sentences[0].status

    asked = "How many seconds does the guardian wait for its provider before a timeout?"
    assert status("The guardian waits one second (1s) for the provider before a timeout [1].", asked) == "unsupported"
    assert answer_ground(text="The guardian waits one second (1s) for the provider before a timeout [1].",
                         articles={1: locks}, language="en", terms_min=0.5,
                         question=asked).sentences[0].status == "supported"  # no other article: nothing to tell
    assert status("It waits one second (1s) before checking for a deadlock [1].",
                  "How long does the server wait on a lock before checking for a deadlock?") == "supported"
    # The customer's own words, in no article, are context.
    assert status("Your nightly CRM job waits one second (1s) before the deadlock check [1].",
                  "How long does our nightly CRM job wait on a lock before a deadlock check?") == "supported"



def test_an_answer_across_languages_without_a_value_is_not_shown():
    """A Russian answer over an English page can be checked only through its values: one that states none says
    nothing an article was seen to hold ("Спасибо за информацию [1]")."""
    ctl = "pg_ctl\npg_ctl waits for the server to stop. The default wait is 60 seconds."
    asked = "Сколько pg_ctl ждёт остановки сервера?"
    thanks = answer_ground(text="Спасибо за информацию [1].", articles={1: ctl}, language="ru", terms_min=0.5,
                           question=asked)
    assert [s.status for s in thanks.sentences] == ["unverified"] and thanks.text
    assert grounding_fails(thanks, question=asked, language="ru")
    waits = answer_ground(text="pg_ctl ждёт остановки сервера 60 секунд [1]. Это значение по умолчанию [1].",
                          articles={1: ctl}, language="ru", terms_min=0.5, question=asked)
    assert not grounding_fails(waits, question=asked, language="ru")


def test_a_figure_for_a_named_setting_stands_on_its_line_across_languages(settings):
    """A name is the same in every language: "wal_keep_size по умолчанию равно 1 GB" over an English page whose 1 GB
    is max_wal_size's is not shown (dropped, not counted, like every sentence across languages)."""
    from supportdesk.pipeline.answer.kb import KbResult, KbSource
    from supportdesk.pipeline.answer.trust import answer_grounding

    settings.ANSWER_GROUNDING = True
    wal = ("Write Ahead Log\nmax_wal_size (integer): Maximum size to let the WAL grow during automatic checkpoints. "
           "The default is 1 GB.\nwal_keep_size (integer): Specifies the minimum size of past WAL files kept in the "
           "pg_wal directory. If wal_keep_size is zero (the default), the system does not keep any extra segments.")
    search = KbResult(query="", texts={1: wal}, sources=[KbSource(number=1, title="Write Ahead Log")])

    def ground(text: str, question: str):
        return answer_grounding(text=text, searches=[search], language="ru", question=question).sentences[0]

    wrong = ground("Значение wal_keep_size по умолчанию равно 1 GB [1].", "Какой дефолт у wal_keep_size?")
    assert wrong.status == "unchecked" and wrong.citation is None
    right = ground("Значение max_wal_size по умолчанию равно 1 GB [1].", "Какой дефолт у max_wal_size?")
    assert right.status == "unverified" and right.citation == 1
    # What is left once the figure is dropped does not answer a question for the setting's default.
    rest = answer_grounding(text="Значение wal_keep_size по умолчанию равно 1 GB [1]. Сегменты хранятся в каталоге "
                                 "pg_wal [1].", searches=[search], language="ru", question="Какой дефолт у wal_keep_size?")
    assert [s.status for s in rest.sentences] == ["unchecked", "unverified"] and rest.sentences[1].values
    assert grounding_fails(rest, question="Какой дефолт у wal_keep_size?", language="ru")
    kept = answer_grounding(text="Значение max_wal_size по умолчанию равно 1 GB [1]. Сегменты хранятся в каталоге "
                                 "pg_wal [1].", searches=[search], language="ru", question="Какой дефолт у max_wal_size?")
    assert not grounding_fails(kept, question="Какой дефолт у max_wal_size?", language="ru")


def test_a_value_pointing_back_to_the_question_restated_answers_it():
    widget = ("Виджет\nАтрибуты тега `<script>`: `data-open=\"true\"` открывает панель чата сразу; "
              "`data-theme=\"dark\"` включает тёмную тему. Ключи API создают в админке.")
    question = "Можно ли сделать, чтобы панель чата открывалась сразу при загрузке страницы, без клика по кнопке?"
    answer = ("Да, можно сделать, чтобы панель чата открывалась сразу при загрузке страницы, без клика по кнопке. "
              "Это можно сделать с помощью атрибута `data-open=\"true\"` в теге `<script>` [1].")
    grounded = _ground(answer, "ru", question=question, a1=widget)
    assert [s.status for s in grounded.sentences] == ["unsupported", "supported"]
    assert not grounding_fails(grounded, question=question, language="ru")
    # Pointing back without a value ("Это делается в админке") states nothing an article was seen to hold about it.
    vague = _ground("Да, можно сделать, чтобы панель чата открывалась сразу при загрузке страницы. Это создают в "
                    "админке [1].", "ru", question=question, a1=widget)
    assert [s.status for s in vague.sentences] == ["unsupported", "supported"]
    assert grounding_fails(vague, question=question, language="ru")


def test_a_figure_from_an_article_that_never_names_the_asked_setting_is_not_its_value():
    # The knowledge base lacks vacuum_failsafe_age's page; the model takes vacuum_cost_limit's 200, with the question's
    # name in the previous sentence and "this setting" in its own.
    cost = ("vacuum_cost_limit ( integer ): This is the accumulated cost that will cause the vacuuming process to "
            "sleep. The default value is 200.")
    answer = "Your config does not set vacuum_failsafe_age. By default this setting is 200 [1]."
    question = "What is the default vacuum_failsafe_age? It is not in our config"
    asked = _ground(answer, question=question, named=("vacuum_failsafe_age",), a1=cost)
    assert [s.status for s in asked.sentences][-1] == "unsupported" and "200" not in asked.text
    # Across languages too: the number is in the article, on no line naming the setting.
    across = _ground("По умолчанию этот параметр равен 200 [1].", "ru", question="дефолт vacuum_failsafe_age?",
                     named=("vacuum_failsafe_age",), a1=cost)
    assert across.sentences[0].status != "unverified" and across.text == ""
    # Without a setting asked about, the article's own figure still supports the sentence.
    plain = _ground("The default vacuum cost limit is 200 [1].", question="default vacuum cost limit?", a1=cost)
    assert plain.sentences[0].status == "supported"
    own = _ground("vacuum_cost_limit is 200 by default [1].", question="default vacuum_cost_limit?",
                  named=("vacuum_cost_limit",), a1=cost)
    assert own.sentences[0].status == "supported"
