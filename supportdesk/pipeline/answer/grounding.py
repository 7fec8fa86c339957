"""Grounding after the answer: every sentence checked against the articles the model was given.

A sentence is *supported* by an article when

- the values it states (numbers with their units, commands, settings, identifiers:
  :func:`values_of`; a name whole: ``lock_timeout`` is not in ``deadlock_timeout``) stand together in one
  sentence of the article or one table row, which also
  holds the words the values answer: at least two of the sentence's content terms that the
  article has at all (one when it has only one, or when it is a table row's whole item, its first
  cell: "integer" on the ``integer`` row). In a paragraph the first sentence lends its
  words and names to the others (a definition names its setting once), and a short title line
  names the article's subject; a number must stand in its own sentence. A limit read from the
  neighbouring table row, or the next sentence's number, is in the article, but not with the
  sentence's words or setting name, so it is not supported; nor is a row's value when the sentence names another
  row's item and not this one's ("columns … table" against the "columns per index" row), a figure on another
  setting's definition ("autovacuum_work_mem (integer): … defaults to -1, indicating that the value of
  maintenance_work_mem should be used") for a question asking that setting's, or a bare number read off a
  compound or an exponent ("32-bit", "2^32"). A passage copied word for word is
  supported as it is. In a table row a number's
  unit must stand in the number's own cell (or the row's item cell), and one of the words must be
  the row's own, not a column name every row carries (rows are ingested ``Seats: 25 | Price: 49 EUR``);
- and, for a sentence without values, at least ``ANSWER_GROUNDING_TERMS_MIN`` of its content
  terms (``retrieval.terms``) are in the article, unless they are all the question's own words and
  one of them is in no article: the question affirmed ("Yes, there is a webhook …").

Words cannot be compared across languages: a sentence in another language than every
article is *unverified*, kept as written and left out of the supported share (its values must
still be in a cited article, a number with its unit in either language's spelling: "1 ГБ" is "1 GB"; and,
given the question in the article's language, the plan's translated sub-queries, each number on a line
with their words: "1 ГБ" for the longest table name is not the "field size | 1 GB" row). One whose numbers
stand only on other lines is *unchecked*: dropped, and, like every sentence across languages, not counted. In an answer that states such a value, its sentences without values or
citation are *unchecked*: dropped, and not counted against the share. Sentences without content terms ("Hope this helps!") and questions
(a model that echoes the customer's question has not answered it) are *neutral*; a sentence that stops
where its value should stand ("The default is [1].") is *unsupported*. A sentence that only repeats what the model was
shown, its articles' header lines ("createdb — create a new PostgreSQL database [1] VACUUM [2]", a small model's
list of titles), the customer's question copied, or what an article is about ("The article explains the VACUUM command"),
is an *echo*: dropped, and not counted. A bare number the customer gave ("PostgreSQL
15", an address "10.0.3.7") need not be in the article when the sentence states a value of its own beside it; said alone, it must. A citation stays only on a sentence its article supports; an unsupported sentence
is dropped; a supported sentence that cites nothing, or cites the wrong article, gets the
number of the article that supports it best. A fenced code block is one unit, its lines checked as
sentences: shown whole, its citation on the line after it, when every line with words is supported,
else dropped whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from retrieval.language import language_detect
from retrieval.terms import name_held, term_stems

CITATION = re.compile(r"\s*\[(\d{1,3})\]")
SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=[^\s\[])")
LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")
QUOTE_MARK = re.compile(r"^\s*>\s?")  # a line quoted from an article (ANSWER_QUOTE_FIRST): one sentence, its own block
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")  # a fenced code block: one unit, kept or dropped whole, its own block
BARE_NUMBER = re.compile(r"\d+(?:\.\d+)*")  # a number without a unit: a version, a count, an address the customer gave
QUESTION_END = re.compile(r"\?[\s\"»”)]*$")  # a sentence that asks (the customer's question echoed back)
# A sentence that stops where its value should stand: "The default value for max_connections is [1]." (the
# citation taken off, nothing is left after "is"). It states nothing, whatever words it shares with an article.
VALUE_LEFT_OUT = re.compile(r"(?:\b(?:is|are|was|were|be|equals|of|to|at|by|the|a|an)|\s(?:составляет|равно|равен|равна"
                            r"|равняется|—))$", re.IGNORECASE)
UNIT_WORDS = frozenset("""
b kb mb gb tb pb byte bytes kib mib gib tib ms s sec secs second seconds min mins minute minutes h hour hours
day days week weeks month months year years digit digits row rows page pages column columns char chars
character characters % percent x times mhz ghz kbit mbit gbit rub usd eur
байт кб мб гб тб мс сек секунд секунды минут минуты час часа часов дней дня день недель месяцев лет
""".split())
# A number, whole ("64" is not in "1,664"); with its unit written on ("64MB", "5min", "1s", "8kB": the manual's and
# the configuration files' own notation), in ``unit``, when the letters are a unit: "3rd", "x86", "v15" hold none.
_UNITS_GLUED = "|".join(sorted((re.escape(word) for word in UNIT_WORDS), key=len, reverse=True))
NUMBER = re.compile(rf"(?<![\w.^])(?P<number>[-+]?\d[\d,.\u00a0\u202f ]*\d|[-+]?\d)(?:(?P<unit>{_UNITS_GLUED})(?!\w)|(?!\w))",
                    re.IGNORECASE)
UNIT = re.compile(r"\s*(%|[a-zA-Zа-яА-ЯёЁ]{1,12})")
# A number's compound ("32-bit", "4-byte", "64-битный"); not an ordinal's ending ("15-й", "2-го").
COMPOUND = re.compile(r"-([^\W\d_]{3,})")
# One unit in both languages: a Russian sentence's "1 ГБ" is an English page's "1 GB", not any "1" on it.
UNIT_SPELLINGS = tuple(frozenset(group.split()) for group in (
    "b byte bytes байт байта байтов", "kb kib кб", "mb mib мб", "gb gib гб", "tb tib тб",
    "ms миллисекунд миллисекунды мс", "s sec secs second seconds сек секунд секунды секунда",
    "min mins minute minutes мин минут минуты минута", "h hour hours час часа часов",
    "day days дней дня день", "% percent процент процента процентов",
))
CODE = re.compile(r"`([^`]{1,80})`")
DIGIT = re.compile(r"\d")
PLACEHOLDER = re.compile(r"<[^<>]+>|\{[^{}]+\}|\.\.\.|…")  # <file>, {id}: what the reader fills in
METAVAR = re.compile(r"[A-Z][A-Z_]*")  # after a flag (`--name NAME`), also the reader's; elsewhere a keyword (`VACUUM FULL`)
HTML_TAG = re.compile(r"</?([A-Za-z][\w-]*)\s*/?>")  # a bare tag, `<script>`, `</div>`: it names an element (with attributes it is code)
IDENTIFIER = re.compile(r"(?<![\w-])(--?[a-z][\w-]+|[A-Za-z]+(?:[_-][A-Za-z0-9]+)+|[A-Z]{2,}[A-Z0-9]*|[a-z]+[A-Z]\w*)(?![\w-])")
# A compound of lower-case words ("knowledge-base", "sign-in", "built-in") is prose, not a setting or a
# flag: an article writing "knowledge base" holds it (a value must stand on the line verbatim).
PROSE_COMPOUND = re.compile(r"[a-z]+(?:-[a-z]+)+")
# A short all-capital word ("HTML", "CSS", "API", "URL") is an ordinary acronym, said in any words ("your HTML
# file", "the page"): prose, not a value that must stand on the article's line. Settings and commands keep
# their marks (LLM_BASE_URL, `VACUUM`, --prune) or are longer.
ACRONYM = re.compile(r"[A-Z]{2,4}")
TITLE_MAX_CHARS = 80  # a longer first line is content, not the article's title
SUBJECT_ELSEWHERE_MIN = 2  # a number's sentence with this many of the question's words from another article is that one's
COPY_MIN_TERMS = 3  # a sentence copied word for word from an article, with at least this many content words, is supported
# A citation inside a line, before a new sentence that has no full stop before it: "VACUUM [3] Как пользоваться …"
# (a small model copying its articles' header lines one after another) is two sentences.
CITED_BREAK = re.compile(r"(\[\d{1,3}\])\s+(?=[A-ZА-ЯЁ])")
FOLD = re.compile(r"[^\w]+")
# A line that defines a setting, as the manual does ("autovacuum_work_mem ( integer ): Specifies …") or a list
# ("`GUARD_FAIL_MODE`: what happens when …"): the figures on it are that setting's, whatever others it names.
DEFINES = re.compile(r"^[\s*>`-]*([a-z][a-z0-9]*(?:_[a-z0-9]+)+)[`*\s]*(?:\(\s*[\w ]+\s*\)\s*)?[:—–]", re.IGNORECASE)
# A sentence that only says what an article is about ("The article explains the VACUUM command and its options.",
# "Статья описывает команду createdb"): a table of contents, not an answer.
# One that goes on to say what the article states ("The article explains that …") is a statement.
ABOUT_ARTICLE = re.compile(
    r"^(?:(?:the|this|that|each)\s+(?:article|document|page|section|source)s?\s+(?:explains|describes|provides|covers"
    r"|discusses|mentions|talks|is about|contains|lists|gives|shows)\b(?!.*\bthat\b)"
    r"|(?:в\s+)?(?:эт(?:а|от|ой|ом)\s+)?(?:стать[яеи]|документ[еа]?|раздел[еа]?|страниц[аеы])\s+(?:описывает|объясняет"
    r"|рассказывает|содержит|посвящ|говорится|описан|приводит|перечисля)(?!.*\bчто\b))", re.IGNORECASE)
Status = Literal["supported", "unsupported", "unverified", "neutral", "unchecked", "echo"]


class SentenceGrounding(BaseModel):
    text: str  # as shown, without citation numbers
    status: Status
    cited: list[int] = Field(default_factory=list)  # the model's numbers
    supported_by: list[int] = Field(default_factory=list)  # articles supporting it, best first
    values: list[str] = Field(default_factory=list)
    missing_values: list[str] = Field(default_factory=list)  # values no article line holds with its words
    citation: int | None = None  # the number it carries in the grounded answer


class Grounding(BaseModel):
    sentences: list[SentenceGrounding]
    text: str  # the grounded answer: unsupported sentences dropped, citations corrected

    @property
    def counted(self) -> list[SentenceGrounding]:
        return [s for s in self.sentences if s.status in ("supported", "unsupported")]

    @property
    def supported_share(self) -> float | None:
        """Supported sentences among those that could be checked; None when none could."""
        counted = self.counted
        return None if not counted else round(sum(s.status == "supported" for s in counted) / len(counted), 3)


def value_norm(value: str) -> str:
    return re.sub(r"[\s,\u00a0\u202f]", "", value.lower()).rstrip(".")


def values_of(text: str) -> list[str]:
    """Numbers with the unit after them, code spans and identifiers (settings, commands, flags)."""
    found: list[str] = []
    for match in NUMBER.finditer(text):
        number = match.group("number").rstrip(".,")
        unit = match.group("unit")
        if unit is None:  # "64 MB": the unit after a space
            after = UNIT.match(text, match.end())
            unit = after.group(1) if after else ""
        word = unit.lower()
        compound = COMPOUND.match(text, match.end()) if not word else None
        if compound:  # "32-bit", "8-byte": the compound is the value, found as written
            found.append(f"{number}-{compound.group(1).lower()}")
            continue
        found.append(f"{number} {word}" if word in UNIT_WORDS else number)
    found += [m.group(1).strip() for m in CODE.finditer(text)]
    found += [m.group(1) for m in IDENTIFIER.finditer(CODE.sub(" ", text))
              if m.group(1).lower() not in UNIT_WORDS and not PROSE_COMPOUND.fullmatch(m.group(1))
              and not ACRONYM.fullmatch(m.group(1))]
    return list(dict.fromkeys(v for v in found if v))


def prose_of(text: str) -> str:
    """The text without its values (numbers, code, settings, flags): the words its language is told by
    ("max_worker_processes по умолчанию равно 8" is Russian)."""
    return IDENTIFIER.sub(" ", NUMBER.sub(" ", CODE.sub(" ", text)))


def _units(text: str) -> list[tuple[str, str]]:
    """Where a value may stand with the words it answers, as (the text that must hold its numbers, the text
    that holds its words and names): a line that is one sentence, a table row or a definition with its term,
    whole; in a paragraph of several sentences, each sentence, the paragraph's first sentence lending its
    words and names (its subject: a setting's name, the topic). A number in one sentence does not answer the
    words of the next: "The maximum precision … is 1000. An unconstrained numeric column …" does not say a
    column's maximum is 1000."""
    units: list[tuple[str, str]] = []
    for line in text.splitlines():
        parts = [part for part in SENTENCE_END.split(line) if part.strip()] if "|" not in line else [line]
        if len(parts) == 1:
            units.append((line, line))
        elif parts:
            units.append((parts[0], parts[0]))
            units += [(part, f"{parts[0]} {part}") for part in parts[1:]]
    return units


def _needles(value: str, *, same_language: bool) -> list[re.Pattern[str]]:
    """How a value is found in a normalized text: a number whole ("64" is not in "1,664"), with its unit
    when the languages agree; an identifier anywhere (spaces are folded away); code with spaces by each of its
    words, the reader's placeholders aside; a bare HTML tag by its element's name (`<script>` is in "add
    `<script src=…>`" and in "the attributes of the script tag")."""
    tag = HTML_TAG.fullmatch(value)
    if tag:
        return [re.compile(re.escape(tag.group(1).lower()))]
    number, _, unit = value.partition(" ")
    is_number = bool(NUMBER.fullmatch(number))
    if unit and not is_number:  # code with spaces (`pg_ctl stop -m fast`): each word
        words = _code_words(value)
        if words:
            return [re.compile(re.escape(value_norm(word))) for word in words]
    needle = re.escape(value_norm(number))
    # 2^32 holds no 32; nor, for a number without a unit, does a compound ("a 32-bit OID" is no limit of 32)
    compound = "" if unit else r"(?!-[^\W\d_]{3})"
    needles = [re.compile(rf"(?<![\d.^]){needle}(?![\d]){compound}" if is_number else needle)]
    if unit and same_language:
        needles.append(re.compile(re.escape(value_norm(unit))))
    elif unit:  # across languages, the unit in any of its spellings (:data:`UNIT_SPELLINGS`), when it has others
        spellings = next((group for group in UNIT_SPELLINGS if unit.lower() in group), None)
        if spellings is not None:
            needles.append(re.compile("|".join(re.escape(word) for word in sorted(spellings, key=len, reverse=True))))
    return needles


def _code_words(value: str) -> list[str]:
    """The words of code with spaces the article must hold: the reader's placeholders (`<file>`, a flag's
    `NAME`) aside."""
    split = value.split()
    return [word for before, word in zip(["", *split], split, strict=False) if not PLACEHOLDER.fullmatch(word)
            and not (before.startswith("-") and METAVAR.fullmatch(word))]


def _names(value: str) -> list[str]:
    """The technical names in a value (settings, flags, commands: ``IDENTIFIER``), lower-cased: each must stand
    whole where the value is found (``retrieval.terms.name_held``), as the folded text cannot tell: "lock_timeout"
    is in "deadlock_timeout" once spaces are gone, and "work_mem = 64MB" would be read off the line on
    ``maintenance_work_mem``."""
    if HTML_TAG.fullmatch(value) or NUMBER.fullmatch(value.partition(" ")[0]):
        return []
    return [word.lower() for word in _code_words(value) if IDENTIFIER.fullmatch(word)]


class _Article:
    def __init__(self, text: str, language: str) -> None:
        self.language = language_detect(text, default=language)
        title = _title(text)
        folded = value_norm(title)
        # (numbers, title|words folded, stems, the row's own stems, the row's item stems, title and words lower-cased)
        self.units = [(value_norm(numbers), f"{folded}|{value_norm(words)}", term_stems(words), _row_own_stems(words),
                       _row_item_stems(words), f"{title.lower()}\n{words.lower()}") for numbers, words in _units(text)]
        self.flat = value_norm(text)
        self.lowered = text.lower()
        self.stems = set().union(*(stems for _, _, stems, _, _, _ in self.units)) if self.units else set()
        self.items = [item for _, _, _, _, item, _ in self.units if item]  # the table rows' items

    def holds(self, values: list[str], stems: set[str], *, same_language: bool, topic: set[str] | None = None
              ) -> bool:
        """All the values stand together in one unit (:func:`_units`) with the words they answer (at least two
        of the sentence's words that the article has, one if it has only one, or a table row's whole item: "the
        largest integer is 2,147,483,647, use bigint beyond" on the ``integer`` row): its numbers in the unit's
        own sentence, its names (settings, commands) there, in the paragraph's first sentence or in the
        article's title. Across languages, where the sentence's words cannot be compared, each value anywhere in
        the article, a number with its unit in any language's spelling; and with ``topic``, the question's words
        in the article's language (the plan's translated sub-queries), each number on a line that holds them
        (:meth:`answers_topic`): "1 ГБ" for the longest table name is not the "Field size: 1 GB" row."""
        names = [name for v in values for name in _names(v)]
        if not same_language:
            return all(n.search(self.flat) for v in values for n in _needles(v, same_language=False)) \
                and all(name_held(name, self.lowered) for name in names) \
                and all(self.answers_topic(v, topic) for v in values if topic and NUMBER.match(v))
        needles = [(_needles(v, same_language=True), bool(NUMBER.match(v))) for v in values]
        wanted = stems & self.stems
        need = min(2, len(wanted))
        return any(all(_value_on(numbers if number else words, value) for value, number in needles)
                   and all(name_held(name, raw) for name in names)
                   and len(unit_stems & wanted) >= (min(need, 1) if item and item <= wanted else need)
                   and (not wanted or own & wanted)
                   and not self.row_neighbour(item, wanted)
                   for numbers, words, unit_stems, own, item, raw in self.units)

    def row_neighbour(self, item: set[str], wanted: set[str]) -> bool:
        """The row of ``item`` is the neighbour of the one the sentence names: the sentence has every word that
        tells another row's item from this one's, and none that tells this one's from it ("columns … table" names
        the "columns per table" row, not "columns per index", whose 32 is not a table's limit)."""
        return bool(item) and any(other - item and other - item <= wanted and not (item - other) & wanted
                                  for other in self.items)

    def names_figure(self, number: str, named: Sequence[str], *, same_language: bool = True) -> bool:
        """For a question asking a named setting's figure or default (``named``, its names): the number stands on a
        line naming the setting, in any language (a name is the same in all). The model may take a neighbouring
        line's number ("50 tuples", ``autovacuum_vacuum_threshold``'s default, for ``autovacuum_naptime``; "1 GB",
        ``max_wal_size``'s, for ``wal_keep_size``), or one of an article that never names the setting ("200",
        ``vacuum_cost_limit``'s, for ``vacuum_failsafe_age``, whose page the knowledge base does not have)."""
        held = [name for name in named if name_held(name, self.lowered)]
        if not held:
            return not named  # no setting asked: nothing to stand by
        needles = _needles(number, same_language=same_language)
        return any(_value_on(numbers, needles) and any(name_held(name, raw) for name in held)
                   and not defines_other(raw.split("\n", 1)[-1], held)
                   for numbers, _, _, _, _, raw in self.units)

    def answers_topic(self, number: str, topic: set[str]) -> bool:
        """The number (with its unit, in any spelling) stands on a line with the topic's words: two of those the
        article has (one when it has only one), one of them the line's own (not a column name every row
        carries). True when the article has none of them: then nothing tells its lines apart."""
        wanted = topic & self.stems
        if not wanted:
            return True
        needles = _needles(number, same_language=False)
        need = min(2, len(wanted))
        return any(_value_on(numbers, needles) and len(unit_stems & wanted) >= need and own & wanted
                   for numbers, _, unit_stems, own, _, _ in self.units)

    def copies(self, sentence: str) -> bool:
        """The sentence stands in the article word for word (a quoted passage may run over several of its
        sentences): supported as it is."""
        return value_norm(sentence) in self.flat


def defines_other(line: str, names: Sequence[str]) -> bool:
    """The line defines another setting than ``names`` (:data:`DEFINES`): "autovacuum_work_mem ( integer ): … It
    defaults to -1, indicating that the value of maintenance_work_mem should be used instead." gives no default
    of maintenance_work_mem."""
    match = DEFINES.match(line)
    return match is not None and match.group(1).lower() not in {name.lower() for name in names}


def _title(text: str) -> str:
    """The article's first line when it is a title (short, one sentence): it names what every line of the article
    is about ("pg_ctl", "8.1. Numeric Types"). Empty when the first line is already content."""
    first = text.split("\n", 1)[0]
    return first if len(first) <= TITLE_MAX_CHARS and len(SENTENCE_END.split(first)) == 1 else ""


def _row_own_stems(line: str) -> set[str]:
    """A line's words less the column names a table row carries in every row ("Seats: 25" → none): what
    tells this row from its neighbours. Other lines: all their words."""
    if "|" not in line:
        return term_stems(line)
    return term_stems(" ".join(cell.split(": ", 1)[-1] for cell in line.split("|")))


def _row_item_stems(line: str) -> set[str]:
    """A table row's item, the value of its first cell ("Name: integer | Storage Size: 4 bytes" → integer): what
    tells the row from its neighbours, when a sentence names all of it ("columns" alone does not name "columns in
    a result set"). Empty for other lines."""
    if "|" not in line:
        return set()
    return term_stems(line.split("|", 1)[0].split(": ", 1)[-1])


def _value_on(flat: str, needles: list[re.Pattern[str]]) -> bool:
    """A value on one normalized line. In a table row ("a | b | c") a number's unit must be in the number's
    own cell or in a cell without numbers (the row's item, "columns per table"): "25 EUR" is not in
    "Seats: 25 | Price: 49 EUR", where EUR belongs to 49."""
    number, *units = needles
    cells = flat.split("|")
    loose = "|".join(cell for cell in cells if not DIGIT.search(cell))  # a unit here is no other number's
    return any(number.search(cell) and all(u.search(cell) or u.search(loose) for u in units) for cell in cells)


def _sentences(text: str) -> list[tuple[str, list[int]]]:
    """(sentence without citations, its citation numbers); numbers written after the sentence's full stop
    belong to it. A fenced code block is one unit, fences included (closed if the model left it open); only a
    number after its closing fence is a citation (``arr[1]`` inside is code)."""
    out: list[tuple[str, list[int]]] = []
    lines = iter(text.splitlines())
    for line in lines:
        if fence := FENCE.match(line):
            block, numbers = [line.strip()], []
            for inner in lines:
                if inner.strip().startswith(fence.group(1)):
                    numbers = [int(n) for n in CITATION.findall(inner)]
                    break
                block.append(inner.rstrip())
            out.append(("\n".join([*block, fence.group(1)]), numbers))
            continue
        parts = [line.strip()] if QUOTE_MARK.match(line) else \
            [piece for part in SENTENCE_END.split(line.strip()) for piece in _cited_split(part)]
        for part in parts:
            numbers = [int(n) for n in CITATION.findall(part)]
            bare = CITATION.sub("", part).strip()
            if not bare and out:  # "[1]" alone after a sentence
                out[-1][1].extend(numbers)
            elif bare:
                out.append((bare, numbers))
    return out


def _cited_split(part: str) -> list[str]:
    """``part`` cut after each citation that a new sentence follows without a full stop (:data:`CITED_BREAK`)."""
    pieces, start = [], 0
    for match in CITED_BREAK.finditer(part):
        pieces.append(part[start:match.end(1)])
        start = match.end()
    return [*pieces, part[start:]]


def _fold(text: str) -> str:
    """Lower-cased words and numbers, one space apart: "26.1. SQL Dump" → "26 1 sql dump"."""
    return FOLD.sub(" ", text.lower()).strip()


def _headings_folded(headings: Iterable[Sequence[str]]) -> tuple[list[str], list[str]]:
    """The articles' header lines (title, headings path) folded, and their parts (each heading of a path,
    ``A > B``), longest first."""
    lines = [_fold(" ".join(header)) for header in headings]
    parts = {_fold(piece) for header in headings for line in header for piece in [line, *line.split(" > ")]}
    return lines, sorted((p for p in parts if p), key=len, reverse=True)


def _echoes(sentence: str, question_folded: str, lines: list[str], parts: list[str]) -> bool:
    """The sentence only repeats what the model was shown: header lines ("createdb — create a new PostgreSQL
    database", "Using the chat widget > Opening a conversation") or a piece of one, a label, not a statement;
    the customer's own words, copied (at least ``COPY_MIN_TERMS`` content words; ``question_folded``: :func:`_fold`'s);
    or what an article is about (:data:`ABOUT_ARTICLE`)."""
    bare = LIST_MARK.sub("", sentence)
    folded = _fold(bare)
    if not folded:
        return False
    if ABOUT_ARTICLE.match(bare):
        return True
    if any(f" {folded} " in f" {line} " for line in lines):
        return True
    if len(term_stems(folded)) >= COPY_MIN_TERMS and f" {folded} " in f" {question_folded} ":
        return True
    rest = f" {folded} "
    for part in parts:
        rest = rest.replace(f" {part} ", "  ")
    return not rest.strip()


def answer_ground(*, text: str, articles: dict[int, str], language: str, terms_min: float,
                  question: str = "", headings: dict[int, Sequence[str]] | None = None,
                  topics: Sequence[str] = (), named: Sequence[str] = ()) -> Grounding:
    """Check each sentence of ``text`` against ``articles`` (number → what the model read of it). With the
    customer's ``question``, a sentence without values made only of the question's words, one of which no
    article of its language holds (:func:`unheld_terms`), is the question affirmed: unsupported, whatever
    else it shares with an article. ``headings``: each article's header as the model read it (its title and
    headings path). A sentence that only repeats those, copies the question or says what an article is about
    (:func:`_echoes`) is an *echo*: dropped, not counted (it is in the article or the message, but says nothing).
    ``topics``: the question in other languages (the plan's translated sub-queries); a number a sentence states
    across languages must stand with their words (:meth:`_Article.holds`). ``named``: the settings whose figure
    or default the question asks; a number stated in an article's language must stand on the line naming one
    (:meth:`_Article.names_figure`)."""
    parsed = {n: _Article(body, language) for n, body in articles.items() if body.strip()}
    asked = term_stems(question)
    given = set(values_of(question))
    unheld = unheld_terms(question, asked, parsed.values(), language) if asked else set()
    header_lines, header_parts = _headings_folded((headings or {}).values())
    question_folded = _fold(question)
    across = term_stems(" ".join(topics))
    results: list[SentenceGrounding] = []
    for sentence, cited in _sentences(text):
        if not FENCE.match(sentence) and _echoes(sentence, question_folded, header_lines, header_parts):
            results.append(SentenceGrounding(text=sentence, status="echo", cited=cited))
            continue
        results.append(_sentence_ground(sentence, cited, parsed, language, terms_min, asked, unheld, given, across,
                                        named))
    results = _across_vouched(results, parsed, language)
    kept = [s for s in results if s.status not in ("unsupported", "unchecked", "echo")]
    # A small model may say one sentence again and again: it is shown once.
    lines = list(dict.fromkeys(_cite(s.text, s.citation) for s in kept))
    return Grounding(sentences=results, text=_join(lines))


def _across_vouched(results: list[SentenceGrounding], articles: dict[int, _Article], language: str
                    ) -> list[SentenceGrounding]:
    """An answer in another language than every article it got that states a value an article holds, in a
    sentence saying what it is ("max_connections по умолчанию равно 100"): its sentences without values, which
    cannot be compared word by word, are *unchecked*: dropped like unsupported ones, but not counted against
    the answer's supported share (they would retract the value for want of a citation)."""
    languages = {a.language for a in articles.values()}
    across = [language_detect(prose_of(s.text), default=language) not in languages for s in results]
    if not any(other and s.status in ("supported", "unverified") and s.values and term_stems(prose_of(s.text))
               for s, other in zip(results, across, strict=True)):
        return results
    return [s.model_copy(update={"status": "unchecked"}) if other and s.status == "unsupported" and not s.values else s
            for s, other in zip(results, across, strict=True)]


def unheld_terms(question: str, asked: set[str], articles: Iterable[_Article], language: str) -> set[str]:
    """The question's words (``asked``: its stems) that no article in the question's language holds: what the customer asks about
    and the articles do not say ("webhook" in "is there a webhook when a plan record is created?"). An answer
    sentence made of the question's words with one of these ("Yes, there is a webhook that fires when a plan
    record is created") is the question affirmed, not something an article states, although "plan", "record"
    and "created" are in the article. Empty when no article is in that language."""
    question_language = language_detect(question, default=language)
    same = [a.stems for a in articles if a.language == question_language]
    return asked - set().union(*same) if same else set()


def _sentence_ground(sentence: str, cited: list[int], articles: dict[int, _Article], language: str,
                     terms_min: float, asked: set[str], unheld: set[str], given: set[str],
                     across: set[str] | None = None, named: Sequence[str] = ()) -> SentenceGrounding:
    if FENCE.match(sentence):
        return _block_ground(sentence, cited, articles, language, terms_min, asked, unheld, given, across, named)
    stems = term_stems(LIST_MARK.sub("", sentence))
    values = values_of(sentence)
    if (not stems and not values) or QUESTION_END.search(sentence):  # a question asks; it states nothing
        return SentenceGrounding(text=sentence, status="neutral", cited=cited)
    if any(v not in given for v in values):  # a value of its own: the customer's bare numbers ("PostgreSQL 15", 10.0.3.7) are context
        values = [v for v in values if v not in given or not BARE_NUMBER.fullmatch(v)]
    if VALUE_LEFT_OUT.search(sentence.rstrip(" .!…")):  # "The default value for max_connections is."
        return SentenceGrounding(text=sentence, status="unsupported", cited=cited, values=values)
    if not values and stems & unheld and stems <= asked:  # only the question's words, one no article holds
        return SentenceGrounding(text=sentence, status="unsupported", cited=cited)
    sentence_language = language_detect(sentence, default=language)
    scored: list[tuple[float, int]] = []
    missing_everywhere = set(values)
    same = {n: a for n, a in articles.items() if a.language == sentence_language}
    numeric = any(NUMBER.match(v) for v in values)
    for number, article in same.items():
        strayed = numeric and _subject_elsewhere(stems & asked, number, same)
        unnamed = [v for v in values if NUMBER.match(v) and named and not article.names_figure(v, named)]
        missing = [v for v in values if not article.holds([v], stems, same_language=True)
                   or v in unnamed or (NUMBER.match(v) and strayed)]
        missing_everywhere &= set(missing)
        share = len(stems & article.stems) / len(stems) if stems else 1.0
        # Copied word for word, unless its figure is another setting's than the one asked ("It defaults to -1 …"
        # off autovacuum_work_mem's definition, for maintenance_work_mem).
        copied = len(stems) >= COPY_MIN_TERMS and not unnamed and article.copies(QUOTE_MARK.sub("", sentence))
        together = copied or not values or (not missing and article.holds(values, stems, same_language=True))
        if together and (copied or values or share >= terms_min):
            scored.append((share + (1.0 if number in cited else 0.0), number))
    supporters = [n for _, n in sorted(scored, key=lambda item: (-item[0], item[1]))]
    if supporters:
        return SentenceGrounding(text=sentence, status="supported", cited=cited, supported_by=supporters,
                                 values=values, citation=supporters[0])
    # Articles in another language: words cannot be compared, only the values (anywhere in the article; with the
    # question's words in the article's language, each number on their line).
    other = [n for n, a in articles.items() if a.language != sentence_language]
    holders = [n for n in other if articles[n].holds(values, stems, same_language=False, topic=across)
               and all(articles[n].names_figure(v, named, same_language=False) for v in values if NUMBER.match(v))]
    vouched = [n for n in cited if n in holders] or (holders[:1] if values else [])
    if vouched:
        return SentenceGrounding(text=sentence, status="unverified", cited=cited, supported_by=holders,
                                 values=values, citation=vouched[0])
    if values and (across or named) and any(articles[n].holds(values, stems, same_language=False) for n in other):
        # Its numbers are in an article, on other lines than the question's words or the setting it names ("1 ГБ" off
        # the "Field size" row, "1" a list's mark): not shown, and, like every sentence across languages, not counted.
        return SentenceGrounding(text=sentence, status="unchecked", cited=cited, values=values)
    return SentenceGrounding(text=sentence, status="unsupported", cited=cited, values=values,
                             missing_values=sorted(missing_everywhere, key=values.index))


def _subject_elsewhere(subject: set[str], number: int, articles: dict[int, _Article]) -> bool:
    """The sentence gives a number of article ``number`` to what another article is about: at least
    ``SUBJECT_ELSEWHERE_MIN`` of the question's words it uses (``subject``) are not in this article but in another
    it got ("The timeout for the guardian provider is one second (1s)": the second is ``deadlock_timeout``'s, on the
    lock page; "guardian" and "provider" are the guardian article's)."""
    absent = subject - articles[number].stems
    if len(absent) < SUBJECT_ELSEWHERE_MIN:
        return False
    others = set().union(*(a.stems for n, a in articles.items() if n != number))
    return len(absent & others) >= SUBJECT_ELSEWHERE_MIN


def _block_ground(block: str, cited: list[int], articles: dict[int, _Article], language: str, terms_min: float,
                   asked: set[str], unheld: set[str], given: set[str], across: set[str] | None = None,
                   named: Sequence[str] = ()) -> SentenceGrounding:
    """A fenced code block, line by line as sentences: supported when every line with words is, else unsupported
    as a whole (code with one invented line, a wrong flag, is not shown; half a block would be broken code)."""
    lines = [_sentence_ground(line.strip(), cited, articles, language, terms_min, asked, unheld, given, across, named)
             for line in block.split("\n")[1:-1] if line.strip()]
    checked = [g for g in lines if g.status != "neutral"]
    values = [v for g in lines for v in g.values]
    if not checked:
        return SentenceGrounding(text=block, status="neutral", cited=cited)
    if any(g.status == "unsupported" for g in checked):
        return SentenceGrounding(text=block, status="unsupported", cited=cited, values=values,
                                 missing_values=[v for g in lines for v in g.missing_values])
    best = next((g for g in checked if g.status == "supported"), checked[0])
    return SentenceGrounding(text=block, status=best.status, cited=cited, supported_by=best.supported_by,
                             values=values, citation=best.citation)


def _cite(sentence: str, number: int | None) -> str:
    """The sentence with its citation before its closing punctuation; a code block's on the line after it."""
    if number is None:
        return sentence
    if FENCE.match(sentence):
        return f"{sentence}\n[{number}]"
    body = sentence.rstrip(".!?…")
    return f"{body} [{number}]{sentence[len(body):]}"


def _join(lines: list[str]) -> str:
    """Sentences back into text: list items on their own lines, prose joined with spaces, a quoted line
    and a code block each a paragraph of its own."""
    def apart(line: str) -> bool:
        return bool(QUOTE_MARK.match(line) or FENCE.match(line))

    out: list[str] = []
    for line in lines:
        if out and not LIST_MARK.match(line) and not apart(line) and not apart(out[-1]):
            out[-1] = f"{out[-1]} {line}" if not LIST_MARK.match(out[-1]) else out[-1] + "\n" + line
        else:
            out.append(line)
    return "".join(("\n\n" if apart(block) or apart(out[i - 1]) else "\n") + block if i else block
                   for i, block in enumerate(out))
