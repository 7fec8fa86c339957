"""Fitting articles into the model's context budget, and mapping ``[n]`` citations back to sources."""

from __future__ import annotations

import re

from retrieval.chunking import token_estimate
from retrieval.schemas import Article, BudgetReport, ContextArticle, Source
from retrieval.terms import term_stems

# Below this many tokens a trimmed article says too little to be worth its header.
MIN_ARTICLE_TOKENS = 40
# A chunk's sentences and lines, each with the space or line break after it (kept: a table's rows stay rows).
PIECE = re.compile(r".+?(?:(?<=[.!?…])\s+|\n+|$)", re.DOTALL)


def context_fit_budget(articles: list[Article], *, budget_tokens: int, first_number: int = 1,
                       query: str = "") -> tuple[list[ContextArticle], BudgetReport]:
    """Number the articles from ``first_number`` and trim them to fit ``budget_tokens`` in total.

    Articles that fit whole are kept whole. Otherwise the budget is shared in
    proportion to rank weights ``1/rank`` (the first article gets the largest
    share), each article is cut to its share (:func:`_article_trim`; a chunk cut, to its sentences with the
    most of ``query``'s words), and an article
    whose share is under ``MIN_ARTICLE_TOKENS`` is dropped (never the first). Shares an article does
    not need (it is shorter) go to the ones below it. The report says what was
    trimmed or dropped.
    """
    texts = [article.text for article in articles]
    sizes = [token_estimate(text) for text in texts]
    original = sum(sizes)
    budget = max(0, budget_tokens)
    allowed = list(sizes)
    if original > budget:
        weights = [1.0 / rank for rank in range(1, len(articles) + 1)]
        remaining_budget, remaining_weight = float(budget), sum(weights)
        for index, size in enumerate(sizes):
            share = remaining_budget * weights[index] / remaining_weight if remaining_weight else 0.0
            allowed[index] = min(size, int(share))
            remaining_budget -= allowed[index]
            remaining_weight -= weights[index]
    out: list[ContextArticle] = []
    dropped: list[int] = []
    terms = term_stems(query)
    for article, text, size, limit in zip(articles, texts, sizes, allowed, strict=True):
        if out and limit < size and limit < MIN_ARTICLE_TOKENS:
            dropped.append(article.document_id)
            continue
        kept = text if limit >= size else _article_trim(article, limit, terms=terms)
        out.append(ContextArticle(number=first_number + len(out), document_id=article.document_id,
                                  title=article.title, source=article.source, heading_path=article.best.heading_path,
                                  text=kept, tokens=token_estimate(kept), original_tokens=size, trimmed=limit < size))
    used = sum(a.tokens for a in out)
    report = BudgetReport(budget_tokens=budget, used_tokens=used, original_tokens=original,
                          trimmed=any(a.trimmed for a in out) or bool(dropped), dropped_document_ids=dropped)
    return out, report


def _article_trim(article: Article, tokens: int, *, terms: set[str] | frozenset[str] = frozenset()) -> str:
    """The article's hit chunks that fit ``tokens``, chosen best first and shown in document order.

    Cutting the text from its start would keep the document's first hits and lose its best one when
    that comes later (a table row or a page further down: the model then reads a neighbouring
    value). The budget left after the whole chunks that fit goes to the best chunk left out. A chunk
    left out is marked with an ellipsis; a chunk that does not fit (the best one alone, or the one
    the budget left goes to) is cut to its sentences around the one with the most of ``terms`` (the
    query's stems: :func:`_window`), from its beginning when it has none of them.
    """
    by_score = sorted(article.chunks, key=lambda c: c.rerank_score if c.rerank_score is not None else c.fused_score,
                      reverse=True)
    if not by_score or token_estimate(by_score[0].text) + 1 > tokens:
        return _window(by_score[0].text if by_score else article.text, tokens, terms)
    kept: dict[int, str] = {}
    used = 0
    for chunk in by_score:
        cost = token_estimate(chunk.text) + 1  # one token for the separator or ellipsis
        if used + cost <= tokens:
            kept[chunk.chunk_id] = chunk.text
            used += cost
    rest = [chunk for chunk in by_score if chunk.chunk_id not in kept]
    if rest and tokens - used - 2 >= MIN_ARTICLE_TOKENS // 2:  # the budget left: the best chunk left out, cut
        kept[rest[0].chunk_id] = _window(rest[0].text, tokens - used - 2, terms)
    parts: list[str] = []
    for chunk in article.chunks:
        if chunk.chunk_id in kept:
            parts.append(kept[chunk.chunk_id])
        elif not parts or parts[-1] != "…":
            parts.append("…")
    return "\n\n".join(parts)


def _window(text: str, tokens: int, terms: set[str] | frozenset[str]) -> str:
    """``text`` cut to ``tokens``: the run of its sentences and lines from the one sharing the most of ``terms``,
    then the ones after it (a setting's definition states its default last), then the ones before, each
    omitted end marked with an ellipsis ("autovacuum_naptime ( integer ): Specifies the minimum delay between
    autovacuum runs … The default is one minute", not the chunk's first lines about another setting). Without
    ``terms``, or a sentence sharing one, or when that sentence alone does not fit: the beginning
    (:func:`_truncate`)."""
    pieces = PIECE.findall(text)
    scores = [len(term_stems(piece) & terms) for piece in pieces]
    if not terms or not pieces or max(scores) == 0:
        return _truncate(text, tokens)
    best = scores.index(max(scores))
    costs = [token_estimate(piece) for piece in pieces]
    room = tokens - 2  # an ellipsis at each end
    if costs[best] > room:
        return _truncate(pieces[best], tokens)
    start, end, used = best, best + 1, costs[best]
    while end < len(pieces) and used + costs[end] <= room:
        used, end = used + costs[end], end + 1
    while start > 0 and used + costs[start - 1] <= room:
        used, start = used + costs[start - 1], start - 1
    return ("… " if start else "") + "".join(pieces[start:end]).rstrip() + (" …" if end < len(pieces) else "")


def _truncate(text: str, tokens: int) -> str:
    """The longest prefix of whole words within ``tokens`` tokens, marked with an ellipsis."""
    words = text.split(" ")
    kept: list[str] = []
    count = 0
    for word in words:
        cost = token_estimate(word)
        if count + cost > max(0, tokens - 1):  # one token for the ellipsis
            break
        kept.append(word)
        count += cost
    return " ".join(kept).rstrip() + " …"


def context_render(articles: list[ContextArticle]) -> str:
    """The articles as the model sees them: ``[n] title — headings`` then the text."""
    blocks = []
    for article in articles:
        header = f"[{article.number}] {article.title}" + (f" — {article.heading_path}" if article.heading_path else "")
        blocks.append(f"{header}\n{article.text}")
    return "\n\n".join(blocks)


def sources_for(articles: list[ContextArticle]) -> list[Source]:
    return [
        Source(number=a.number, document_id=a.document_id, title=a.title, source=a.source,
               url=a.source if a.source.startswith(("http://", "https://")) else None)
        for a in articles
    ]


_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


def citations_resolve(*, text: str, sources: list[Source]) -> list[Source]:
    """The sources an answer actually cites with ``[n]`` (or ``[n, m]``), in order of first citation.

    Numbers that match no source are ignored; uncited sources are not listed.
    """
    by_number = {source.number: source for source in sources}
    cited: dict[int, Source] = {}
    for match in _CITATION.finditer(text):
        for number in (int(part) for part in match.group(1).split(",")):
            if number in by_number and number not in cited:
                cited[number] = by_number[number]
    return list(cited.values())
