"""Heading-aware chunking with a size limit and overlap, and the token estimate it uses."""

from __future__ import annotations

import re
from dataclasses import dataclass

from retrieval.parsing import Section

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
HEADING_SEPARATOR = " > "


def token_estimate(text: str) -> int:
    """Words plus punctuation marks: a cheap, model-independent token count.

    Subword tokenizers produce somewhat more (about 1.3x for English, more for
    Russian); budgets are set with that margin in mind.
    """
    return len(_TOKEN.findall(text))


@dataclass
class ChunkDraft:
    position: int
    heading_path: str
    text: str
    token_count: int


def chunks_from_sections(sections: list[Section], *, max_tokens: int, overlap_tokens: int) -> list[ChunkDraft]:
    """Split ``sections`` into chunks of at most about ``max_tokens`` tokens.

    A chunk never crosses a heading, so each keeps the heading path it came from;
    consecutive chunks of one section share ``overlap_tokens`` tokens (a table's or a
    list's whole last lines, else a paragraph's last whole words) so a sentence cut at a
    boundary is still found whole in one of them.
    """
    if max_tokens < 16:
        raise ValueError("max_tokens must be at least 16")
    overlap_tokens = max(0, min(overlap_tokens, max_tokens // 2))
    drafts: list[ChunkDraft] = []
    for section in sections:
        heading = HEADING_SEPARATOR.join(section.heading_path)
        for text in _split_section(section.text, max_tokens=max_tokens, overlap_tokens=overlap_tokens):
            drafts.append(ChunkDraft(position=len(drafts), heading_path=heading, text=text,
                                     token_count=token_estimate(text)))
    return drafts


def _split_section(text: str, *, max_tokens: int, overlap_tokens: int) -> list[str]:
    pieces = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    units: list[str] = []  # paragraphs, or sentences/word runs of paragraphs that are too long
    for piece in pieces:
        if token_estimate(piece) <= max_tokens:
            units.append(piece)
        else:
            units.extend(_split_long(piece, max_tokens))
    chunks: list[str] = []
    current: list[str] = []
    current_tokens = 0
    for unit in units:
        unit_tokens = token_estimate(unit)
        if current and current_tokens + unit_tokens > max_tokens:
            chunks.append("\n\n".join(current))
            tail = _tail(chunks[-1], overlap_tokens) if overlap_tokens else ""
            current = [tail] if tail and token_estimate(tail) + unit_tokens <= max_tokens else []
            current_tokens = token_estimate(tail) if current else 0
        current.append(unit)
        current_tokens += unit_tokens
    if current:
        chunks.append("\n\n".join(current))
    return chunks


def _split_long(paragraph: str, max_tokens: int) -> list[str]:
    """A paragraph over ``max_tokens`` in pieces that fit.

    Lines first when it has several (a table, a list, code): a table's header row
    (with its rule line) starts every piece, so each still says what its columns
    are. Prose by sentences. A line or sentence still too long is cut by words,
    packed by their token count (punctuation-heavy text has many tokens per word).
    """
    lines = [line for line in paragraph.splitlines() if line.strip()]
    if len(lines) > 1:
        header = _table_header(lines)
        budget = max_tokens - token_estimate("\n".join(header))
        if header and budget >= max_tokens // 2:
            return ["\n".join([*header, piece]) for piece in _pack(lines[len(header):], budget, "\n")]
        return _pack(lines, max_tokens, "\n")
    return _pack(_SENTENCE_END.split(paragraph), max_tokens, " ")


def _table_header(lines: list[str]) -> list[str]:
    """A Markdown table's header row and rule line, or nothing when ``lines`` is not a table."""
    if len(lines) > 2 and lines[0].lstrip().startswith("|") and re.fullmatch(r"[\s|:\-]+", lines[1]):
        return lines[:2]
    if len(lines) > 1 and lines[0].lstrip().startswith("|") and lines[1].lstrip().startswith("|"):
        return lines[:1]
    return []


def _pack(units: list[str], max_tokens: int, joiner: str) -> list[str]:
    """``units`` joined by ``joiner`` into pieces of at most ``max_tokens``; a unit too long is cut by words."""
    out: list[str] = []
    current: list[str] = []
    current_tokens = 0
    for unit in units:
        for part in _cut_words(unit, max_tokens) if token_estimate(unit) > max_tokens else [unit]:
            tokens = token_estimate(part)
            if current and current_tokens + tokens > max_tokens:
                out.append(joiner.join(current))
                current, current_tokens = [], 0
            current.append(part)
            current_tokens += tokens
    if current:
        out.append(joiner.join(current))
    return out


def _cut_words(text: str, max_tokens: int) -> list[str]:
    """Whole words packed up to ``max_tokens`` tokens each (a single over-long word stands alone)."""
    pieces: list[str] = []
    current: list[str] = []
    count = 0
    for word in text.split():
        tokens = token_estimate(word)
        if current and count + tokens > max_tokens:
            pieces.append(" ".join(current))
            current, count = [], 0
        current.append(word)
        count += tokens
    if current:
        pieces.append(" ".join(current))
    return pieces


def _tail(text: str, tokens: int) -> str:
    """The end of ``text`` worth at most ``tokens`` tokens: its last whole lines when it ends in lines that fit (a
    table's rows, a list's items: a row cut in two and run into the next would pair one row's item with the
    next row's value, "… per database Item: columns per index | Upper Limit: 32"), else the last whole words of
    its last line (a paragraph)."""
    lines = [line for line in text.splitlines() if line.strip()]
    kept = _last_fitting(lines, tokens)
    if kept:
        return "\n".join(kept)
    return " ".join(_last_fitting(lines[-1].split() if lines else [], tokens))


def _last_fitting(parts: list[str], tokens: int) -> list[str]:
    """The last of ``parts`` worth at most ``tokens`` tokens together, in order."""
    kept: list[str] = []
    count = 0
    for part in reversed(parts):
        count += token_estimate(part)
        if count > tokens:
            break
        kept.append(part)
    return kept[::-1]
