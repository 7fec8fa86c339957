"""Fitting articles into the model's context budget, and mapping ``[n]`` citations back to sources."""

from __future__ import annotations

import re

from retrieval.chunking import token_estimate
from retrieval.schemas import Article, BudgetReport, ContextArticle, Source

# Below this many tokens a trimmed article says too little to be worth its header.
MIN_ARTICLE_TOKENS = 40


def context_fit_budget(articles: list[Article], *, budget_tokens: int, first_number: int = 1
                       ) -> tuple[list[ContextArticle], BudgetReport]:
    """Number the articles from ``first_number`` and trim them to fit ``budget_tokens`` in total.

    Articles that fit whole are kept whole. Otherwise the budget is shared in
    proportion to rank weights ``1/rank`` (the first article gets the largest
    share), each article is cut to its share at a word boundary, and an article
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
    for article, text, size, limit in zip(articles, texts, sizes, allowed, strict=True):
        if out and limit < size and limit < MIN_ARTICLE_TOKENS:
            dropped.append(article.document_id)
            continue
        kept = text if limit >= size else _article_trim(article, limit)
        out.append(ContextArticle(number=first_number + len(out), document_id=article.document_id,
                                  title=article.title, source=article.source, heading_path=article.best.heading_path,
                                  text=kept, tokens=token_estimate(kept), original_tokens=size, trimmed=limit < size))
    used = sum(a.tokens for a in out)
    report = BudgetReport(budget_tokens=budget, used_tokens=used, original_tokens=original,
                          trimmed=any(a.trimmed for a in out) or bool(dropped), dropped_document_ids=dropped)
    return out, report


def _article_trim(article: Article, tokens: int) -> str:
    """The article's hit chunks that fit ``tokens``, chosen best first and shown in document order.

    Cutting the text from its start would keep the document's first hits and lose its best one when
    that comes later (a table row or a page further down: the model then reads a neighbouring
    value). The budget left after the whole chunks that fit goes to the beginning of the best chunk
    left out. A chunk left out is marked with an ellipsis; the best chunk is cut at a word boundary
    when it does not fit alone.
    """
    by_score = sorted(article.chunks, key=lambda c: c.rerank_score if c.rerank_score is not None else c.fused_score,
                      reverse=True)
    if not by_score or token_estimate(by_score[0].text) + 1 > tokens:
        return _truncate(by_score[0].text if by_score else article.text, tokens)
    kept: dict[int, str] = {}
    used = 0
    for chunk in by_score:
        cost = token_estimate(chunk.text) + 1  # one token for the separator or ellipsis
        if used + cost <= tokens:
            kept[chunk.chunk_id] = chunk.text
            used += cost
    rest = [chunk for chunk in by_score if chunk.chunk_id not in kept]
    if rest and tokens - used - 2 >= MIN_ARTICLE_TOKENS // 2:  # the budget left: the beginning of the best chunk left out
        kept[rest[0].chunk_id] = _truncate(rest[0].text, tokens - used - 2)
    parts: list[str] = []
    for chunk in article.chunks:
        if chunk.chunk_id in kept:
            parts.append(kept[chunk.chunk_id])
        elif not parts or parts[-1] != "…":
            parts.append("…")
    return "\n\n".join(parts)


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
