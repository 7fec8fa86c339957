"""Chunking: headings are boundaries, sizes are limited, consecutive chunks overlap."""

from __future__ import annotations

import re

from retrieval.chunking import chunks_from_sections, token_estimate
from retrieval.parsing import Section


def test_chunks_never_cross_headings_and_keep_their_path():
    sections = [Section(["Guide"], "Intro."), Section(["Guide", "Refunds"], "Refund text."),
                Section(["Guide", "Refunds", "Partial"], "Partial text.")]
    drafts = chunks_from_sections(sections, max_tokens=100, overlap_tokens=10)
    assert [(d.heading_path, d.text) for d in drafts] == [
        ("Guide", "Intro."), ("Guide > Refunds", "Refund text."), ("Guide > Refunds > Partial", "Partial text.")]
    assert [d.position for d in drafts] == [0, 1, 2]


def test_long_sections_are_split_within_the_limit_with_overlap():
    paragraphs = [" ".join(f"p{p}w{w}" for w in range(30)) + "." for p in range(10)]
    drafts = chunks_from_sections([Section(["Long"], "\n\n".join(paragraphs))], max_tokens=80, overlap_tokens=10)
    assert len(drafts) > 3
    assert all(d.token_count <= 80 for d in drafts)
    for previous, current in zip(drafts, drafts[1:], strict=False):
        # The next chunk starts with the previous chunk's last few words (at most ~10 tokens).
        words, following = previous.text.split(), current.text.split()
        overlap = max((n for n in range(1, 11) if following[:n] == words[-n:]), default=0)
        assert 5 <= overlap <= 10
    body = " ".join(d.text for d in drafts)
    assert all(f"p{p}w29." in body for p in range(10))  # nothing lost


def test_a_huge_sentence_is_cut_by_words():
    sentence = " ".join(f"word{i}" for i in range(500))
    drafts = chunks_from_sections([Section([], sentence)], max_tokens=50, overlap_tokens=0)
    assert all(d.token_count <= 50 for d in drafts)
    assert " ".join(d.text for d in drafts).split() == sentence.split()


def test_token_estimate_counts_words_and_punctuation():
    assert token_estimate("Hello, world!") == 4
    assert token_estimate("Привет, мир") == 3
    assert token_estimate("") == 0


def test_a_punctuation_heavy_table_is_split_to_the_limit_and_each_piece_keeps_its_header():
    header = "| Setting | Default | Range | Notes |\n|---|:---:|---|---|"
    rows = "\n".join(f"| option.{i} | {i}.{i}% | [{i}-{i * 2}] | (a/b), {{c}}; <d> |" for i in range(60))
    drafts = chunks_from_sections([Section(["Limits"], f"{header}\n{rows}")], max_tokens=200, overlap_tokens=30)
    assert len(drafts) > 3
    assert all(d.token_count <= 200 for d in drafts)
    assert all(d.text.startswith(header) for d in drafts)
    body = "\n".join(d.text for d in drafts)
    assert all(f"| option.{i} |" in body for i in range(60))  # no row lost


def test_a_long_run_of_punctuation_heavy_words_is_cut_by_tokens_not_words():
    text = " ".join(f"a.b/c-{i}" for i in range(300))  # 7 tokens a word
    drafts = chunks_from_sections([Section([], text)], max_tokens=60, overlap_tokens=0)
    assert all(d.token_count <= 60 for d in drafts)
    assert " ".join(d.text for d in drafts).split() == text.split()


def test_the_overlap_of_a_table_is_whole_rows_never_one_row_run_into_the_next():
    tables = "\n\n".join("\n".join(f"Item: columns per thing{t}{r} | Upper Limit: {t}{r}0" for r in range(3))
                         for t in range(1, 10))
    drafts = chunks_from_sections([Section(["Limits"], tables)], max_tokens=60, overlap_tokens=20)
    assert len(drafts) > 3
    lines = [line for d in drafts for line in d.text.splitlines() if line.strip()]
    row = re.compile(r"Item: columns per thing(?P<t>\d)(?P<r>\d) \| Upper Limit: (?P=t)(?P=r)0")
    assert all(row.fullmatch(line) for line in lines), [line for line in lines if not row.fullmatch(line)]
    # The overlap is still there: a chunk begins with the rows that ended the one before it.
    assert all(a.text.endswith(b.text.split("\n\n")[0]) for a, b in zip(drafts, drafts[1:], strict=False))


def test_the_overlap_of_prose_is_the_last_words_of_its_last_paragraph():
    paragraphs = [" ".join(f"p{p}w{i}" for i in range(30)) for p in range(4)]
    drafts = chunks_from_sections([Section([], "\n\n".join(paragraphs))], max_tokens=80, overlap_tokens=10)
    second = drafts[1].text.split("\n\n")[0].split()
    assert second and all(word.startswith(second[0][:2]) for word in second)  # one paragraph's words, not two
    assert drafts[0].text.split()[-len(second):] == second
