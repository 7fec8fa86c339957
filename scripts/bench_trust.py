"""CPU of the trust checks per turn: coverage before the answer and grounding after it.

Usage (no services needed; the PostgreSQL manual pages when postgresql-doc-15 is installed):
    python scripts/bench_trust.py [--turns 300]

Articles are the demo knowledge base's and the manual pages' sections as ingestion parses them,
cut to the answer prompt's budget (``LLM_CONTEXT_BUDGET`` of the run command, 400 tokens over two
to five articles). Each simulated turn takes a question, its five best articles by shared words,
and a five-sentence answer mixing lines copied from them, paraphrases, values from a neighbouring
line and invented sentences. It prints the CPU time (``time.process_time``) per turn, p50 / p95, of
``coverage_assess``, of ``answer_ground``, and of what follows it: the judgement whether the answer
fails (``answer_judged``; with ``ANSWER_RELEVANCE_MIN`` set, off by default, also whether what it states is
about the question: up to two sentences embedded) and, when it does, the article line quoted in its place (``quote_best``, and
``quote_judged``). The questions' own vectors are embedded before the timing: a turn's earlier stages
embedded the message already. Cold caches: every
turn's words new to the process (the worst case); warm: a worker that has seen the knowledge base's
words.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
import django  # noqa: E402

django.setup()

from retrieval.coverage import coverage_assess  # noqa: E402
from retrieval.demo import DEMO_KB_DIR  # noqa: E402
from retrieval.parsing import document_parse  # noqa: E402
from retrieval.terms import term_stems, word_stem  # noqa: E402
from retrieval.embedders import embedder_get  # noqa: E402
from supportdesk.pipeline.answer import trust  # noqa: E402
from supportdesk.pipeline.answer.prefetch import message_query  # noqa: E402
from supportdesk.pipeline.answer.grounding import answer_ground  # noqa: E402
from supportdesk.pipeline.answer.kb import KbResult, KbSource  # noqa: E402

BUDGET_WORDS = 300  # ~400 tokens


def sections() -> list[str]:
    paths = sorted(DEMO_KB_DIR.glob("*/*.md"))
    try:
        from pg_manual_kb import manual_pages

        paths += sorted(manual_pages().values())
    except SystemExit as exc:
        print(f"(without the PostgreSQL manual: {exc})")
    out = []
    for path in paths:
        parsed = document_parse(filename=path.name, content=path.read_bytes())
        out += [f"{parsed.title}\n{s.text}" for s in parsed.sections if len(s.text.split()) > 20]
    return out


def turn_case(rng: random.Random, pool: list[str]) -> tuple[str, list[str], str]:
    source = rng.choice(pool)
    lines = [line for line in source.splitlines() if len(line.split()) > 4] or [source]
    question = " ".join(rng.choice(lines).split()[:10]) + "?"
    asked = term_stems(question)
    ranked = sorted(pool, key=lambda text: -len(asked & term_stems(text[:2000])))[:5]
    share = BUDGET_WORDS // len(ranked)
    articles = [" ".join(text.split(" ")[:share]) for text in ranked]
    copied = [rng.choice(lines) for _ in range(2)]
    neighbour = lines[min(len(lines) - 1, lines.index(copied[0]) + 1)]
    answer = " ".join([f"{copied[0]} [1].", f"{copied[1]} [2].", f"The value is {rng.randint(2, 9999)} MB [1].",
                       f"{' '.join(neighbour.split()[:12])} [3].", "Contact your hosting provider for help [1]."])
    return question, articles, answer


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    pool = sections()
    rng = random.Random(7)
    cases = [turn_case(rng, pool) for _ in range(args.turns)]
    print(f"{len(pool)} article sections, {len(cases)} turns")
    # The question's vector comes from the earlier stages in a turn (embed_queries shares it): not timed here.
    embedder_get().embed_queries(list(dict.fromkeys(message_query(q) for q, _, _ in cases)))
    for cache in ("cold", "warm"):
        coverage, grounding, quote, failed, quoted, quoting = [], [], [], 0, 0, []
        for question, articles, answer in cases:
            if cache == "cold":
                word_stem.cache_clear()
            started = time.process_time()
            coverage_assess(message=question, language="en", dense=0.9, articles=articles)
            middle = time.process_time()
            grounded = answer_ground(text=answer, articles=dict(enumerate(articles, 1)), language="en",
                                     terms_min=0.5, question=question,
                                     headings={n: (text.split("\n", 1)[0], "") for n, text in enumerate(articles, 1)})
            ended = time.process_time()
            if trust.answer_judged(grounded, question=question, language="en")[0]:
                failed += 1
                search = KbResult(query=question, texts=dict(enumerate(articles, 1)),
                                  sources=[KbSource(number=n, title=f"article {n}") for n in range(1, len(articles) + 1)])
                line = trust.quote_best(question=question, searches=[search])
                if line is not None and trust.quote_judged(line=line[0], question=question)[0]:
                    quoted += 1
                    quoting.append((time.process_time() - ended) * 1000)
            quote.append((time.process_time() - ended) * 1000)
            coverage.append((middle - started) * 1000)
            grounding.append((ended - middle) * 1000)
        print(f"{cache} caches: {failed} of {len(cases)} answers failed grounding, {quoted} of them quoted"
              + (f" (the quoted turns' CPU after grounding: p50 {statistics.median(quoting):.2f} ms, "
                 f"max {max(quoting):.2f} ms)" if quoting else ""))
        for name, values in (("coverage", coverage), ("grounding", grounding), ("fail+quote", quote),
                             ("all", [a + b + c for a, b, c in zip(coverage, grounding, quote, strict=True)])):
            values.sort()
            p95 = values[int(0.95 * (len(values) - 1))]
            print(f"{cache} caches: {name:<10} CPU per turn p50 {statistics.median(values):6.2f} ms, p95 {p95:6.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
