"""Content terms of a text, compared by stem: what coverage and grounding check words with.

A word is stemmed by Snowball (English for Latin letters, Russian for Cyrillic: "files" and
"file", "сайте" and "сайт" meet) and cut to its first letters, which joins the forms Snowball
leaves apart ("формата", "форматы"; docs/benchmarks.md: first-letters stems lifted Russian
lexical R@1 from 0.80 to 0.91). Short words and the words every support question has ("how",
"please", "можно", "again") say nothing about what is asked and are left out. Stems are cached
per word: a turn's articles repeat the same words.
"""

from __future__ import annotations

import functools
import re

import snowballstemmer

WORD = re.compile(r"[^\W_]{3,}")
STEM_LETTERS = 5
# Question words, auxiliaries, pronouns and support filler, English and Russian: they match any article.
STOP = frozenset("""
the and for are but not you your yours our ours can could would should will shall may might must
have has had does did doing done was were been being this that these those there here what which who
whom whose when where why how with without from into onto over under about than then them they their
its it's get got make made use used using want need like also just only very much many more most some
any all each every other same such own please help thanks thank hello dear sir madam tell know let
able way ways possible question questions problem issue work works working one two able yes okay
hope helps helped glad happy feel free assist assistance anything else welcome regards sorry note
see again put give gives start several often after once week last next instead still already other
something everything stop happen happens happened thing things kind lot bit want wants
is am do does did if or so to of in on at by an as be it me my we us a i
как какой какая какие каким каких какое что чем чего чему почему зачем где куда когда кто кого кому
мне меня мой моя мои мое моё наш наша наши ваш ваша ваши вас вам вы мы они она оно его её ее их
это этот эта эти этого этой тот та те того такой такая такие можно нужно надо ли не ни да нет или
так уже еще ещё там тут здесь есть был была были было будет быть для при про под над без после
через между если чтобы тоже также только очень много всех все всё весь пожалуйста спасибо здравствуйте
помогите помочь подскажите скажите вопрос проблема сделать делать могу можете может хочу хотим
надеюсь помогло рад обращайтесь вопросы сколько снова каком какую делает происходит посмотреть
поменять сменить перейти свой свою своё свои моём моей само сама сам видят отличается пару нужен нужна
""".split())


_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
# Technical names a question may ask about: a setting, function or command with an underscore
# (max_wal_senders, pg_dump), a long option (--exclude-table-data) or anything in backticks. Words
# split them ("vacuum_freeze_min_age" has the words of every *_freeze_*_age setting), so they are
# compared whole.
NAME = re.compile(r"`([^`\n]{2,80})`|(?<![\w-])(--[a-z][\w-]+|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)(?![\w-])")
_STEMMERS = {"en": snowballstemmer.stemmer("english"), "ru": snowballstemmer.stemmer("russian")}


def names_of(text: str) -> list[str]:
    """The technical names in ``text`` (:data:`NAME`), lower-cased, in order, each once."""
    return list(dict.fromkeys((m.group(1) or m.group(2)).strip().lower() for m in NAME.finditer(text)
                              if (m.group(1) or m.group(2)).strip()))


def name_held(name: str, text: str) -> bool:
    """Whether ``text`` (lower-cased) holds the technical name ``name`` whole: "lock_timeout" is not in
    "deadlock_timeout", "vacuum_freeze_max_age" not in "autovacuum_freeze_max_age", "pg_dump" not in
    "pg_dumpall" (each another setting or tool)."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def term_stems(text: str) -> set[str]:
    """The stems of the text's content words (stop words, digits-only and short words left out)."""
    return {word_stem(word) for word in WORD.findall(text.lower()) if word not in STOP and not word.isdigit()}


@functools.lru_cache(maxsize=200_000)
def word_stem(word: str) -> str:
    stemmer = _STEMMERS["ru" if _CYRILLIC.search(word) else "en"]
    return stemmer.stemWord(word)[:STEM_LETTERS]
