"""Answer evaluation on labelled questions (``manage.py evaluate_answers``).

Each question runs as a full turn through the real pipeline (a new conversation,
the Celery chain on the running workers: guardian, plan, prefetch, answer), one
at a time so the timings are a single customer's. Per language it reports the
share of turns with the right final action, of answers citing the expected
article, of answers containing every expected key fact, and the time from the
message to the plan line, to the first answer token and to done (p50 / p95).

Trust (questions labelled ``expected_action: no_answer`` are ones the knowledge base does not
cover): **false answers**, uncovered questions that got an answer citing a source; **over-refusal**,
covered questions that ended ``no_answer`` (or blocked); **answered without the facts**, covered
questions answered (not refused) whose answer lacks a key fact: a wrong or missing value; **a wrong
number stated**, the answered ones that lack a numeric key fact and state another number instead (one
neither in the question nor among the facts' spellings; citation marks aside): the neighbouring row's
limit rather than an omission. It is a lower bound of wrong values: a wrong name ("smart" for "fast") or
a number in words is not counted. **citation precision**, of the articles the covered answers cite, the share that is the expected
one; the answers' **supported share** (grounding); how often the customer's intent line **echoes a
worked example** of the planning prompt; and the time to done of ``no_answer`` turns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from guard.evaluation import percentile
from sgr.intent import intent_echoes_example
from sgr.schema import Action
from supportdesk.answer_replay import Replayed, answer_replay
from supportdesk.models import Turn, TurnEvent
from supportdesk.outcome import turn_outcome
from supportdesk.pipeline.submit import ask_submit, turn_wait_or_current


class AnswerCase(BaseModel):
    """One labelled question. ``expected_article`` is the knowledge-base file's stem (any language's copy
    counts); a key fact matches when any of its ``|``-separated spellings is in the answer (case-insensitive)."""

    text: str = Field(min_length=1)
    language: str = "en"
    expected_action: Action = "normal"
    expected_article: str = ""
    key_facts: list[str] = Field(default_factory=list)
    kind: str = ""  # "kb", "spam", "ambiguous", "uncovered": for the reader, not scored
    split: str = ""  # "dev" (tuned on) or "held_out" (never tuned on): ``--split`` picks one

    @field_validator("expected_article", "key_facts", mode="before")
    @classmethod
    def _null_is_none_expected(cls, value: Any, info: Any) -> Any:
        """``null`` (an uncovered question has no article and no facts) reads as left out."""
        return ([] if info.field_name == "key_facts" else "") if value is None else value


class CaseResult(BaseModel):
    text: str
    language: str
    expected_action: str
    status: str
    final_action: str = ""
    cited: list[str] = Field(default_factory=list)  # stems of the cited articles
    cites_expected: bool | None = None
    facts_found: list[str] = Field(default_factory=list)
    has_facts: bool | None = None
    plan_s: float | None = None
    first_token_s: float | None = None
    done_s: float | None = None
    answer: str = ""
    wrong_number: bool | None = None  # covered: lacks a numeric key fact and states another number
    false_answer: bool | None = None  # uncovered: answered with a cited source
    refused: bool | None = None  # covered: ended no_answer, blocked or handed to a person
    precise_citations: int = 0  # cited articles that are the expected one (covered questions)
    supported_share: float | None = None
    relevance: float | None = None  # the shown answer's cosine with the question (ANSWER_RELEVANCE_MIN's scale)
    intent_echo: bool = False
    intent: str = ""


class LanguageReport(BaseModel):
    language: str
    turns: int
    right_action: float
    cites_expected: float | None
    key_facts: float | None
    answered: int  # turns expected to be answered (normal) that the scores above count
    plan_p50: float | None
    plan_p95: float | None
    first_token_p50: float | None
    first_token_p95: float | None
    done_p50: float | None
    done_p95: float | None
    failed: int
    uncovered: int = 0
    false_answers: float | None = None
    over_refusal: float | None = None
    answered_without_facts: float | None = None
    answered_with_wrong_number: float | None = None
    citation_precision: float | None = None
    supported_share_mean: float | None = None
    intent_echo: float | None = None
    no_answer_done_p50: float | None = None
    # Decided before the answer (no answer-model call: no token streamed) against retracted after it by grounding:
    # issue 28's ≤ 3 s target is the first kind's.
    no_answer_before: int = 0
    no_answer_before_plan: int = 0  # of those, decided before the plan (no plan line: coverage_first)
    no_answer_retracted: int = 0
    no_answer_before_done_p50: float | None = None


class AnswerFileError(ValueError):
    """A line of the labelled file is not an :class:`AnswerCase`."""


def cases_read(path: Path) -> list[AnswerCase]:
    if not path.exists():
        raise AnswerFileError(f"File not found: {path}")
    cases: list[AnswerCase] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(AnswerCase.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            raise AnswerFileError(f"line {number}: {exc}") from exc
    return cases


def fact_present(fact: str, text: str) -> bool:
    lowered = text.lower()
    return any(spelling.strip().lower() in lowered for spelling in fact.split("|") if spelling.strip())


NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
CITATION_MARK = re.compile(r"\[\d+\]")


def wrong_number_stated(case: AnswerCase, answer: str) -> bool:
    """The answer lacks a numeric key fact and states a number that is neither in the question nor in any
    of the facts' spellings (``[1]`` citation marks aside): a value taken from somewhere else."""
    if not any(NUMBER.search(f) and not fact_present(f, answer) for f in case.key_facts):
        return False
    known = set(NUMBER.findall(case.text)).union(*(NUMBER.findall(f) for f in case.key_facts))
    return any(number not in known for number in NUMBER.findall(CITATION_MARK.sub(" ", answer)))


def case_run(case: AnswerCase, *, timeout: float) -> CaseResult:
    """Send the question as a customer would and wait (up to ``timeout`` s) for the turn to end."""
    turn = ask_submit(text=case.text, language=case.language).turn
    turn = turn_wait_or_current(turn_id=turn.pk, timeout=timeout)
    return case_score(case, turn)


def case_stored(case: AnswerCase, *, timeout: float, reground: bool = False) -> CaseResult:
    """The latest finished turn already in the database that asked the question, scored again (no new turn):
    how a change of the scoring reads an earlier run; with ``reground``, its answer grounded again by the
    current code (``supportdesk.answer_replay``): how a change of grounding reads it. A question never asked
    scores as failed."""
    turn = (Turn.objects.filter(user_message__text=case.text, status__in=Turn.TERMINAL)
            .select_related("user_message").order_by("-created_at").first())
    if turn is None:
        return CaseResult(text=case.text, language=case.language, expected_action=case.expected_action,
                          status="not asked")
    return case_score(case, turn, replayed=answer_replay(turn) if reground else None)


def case_regrounded(case: AnswerCase, *, timeout: float) -> CaseResult:
    return case_stored(case, timeout=timeout, reground=True)


def cited_names(sources: list[dict[str, Any]]) -> list[str]:
    """The cited documents' file names without extension, in citation order (an address's last part for a
    web page). Sources carry the document's id, not its path: the customer never sees a server path."""
    from retrieval.models import Document  # at call time: retrieval is optional

    ids = [s.get("document_id") for s in sources]
    paths: dict[Any, str] = dict(
        Document.objects.filter(pk__in=[i for i in ids if isinstance(i, int)]).values_list("pk", "source"))
    return [Path(str(paths.get(s.get("document_id")) or s.get("url") or s.get("title") or "")).stem for s in sources]


def case_score(case: AnswerCase, turn: Turn, *, replayed: Replayed | None = None) -> CaseResult:
    """The turn scored against the case; with ``replayed``, its answer as the current grounding shows it."""
    outcome = turn_outcome(turn=turn)
    begun = turn.created_at
    firsts: dict[str, Any] = {}
    for kind, at in TurnEvent.objects.filter(turn=turn, type__in=("plan", "token", "done")).order_by("seq").values_list(
            "type", "created_at"):
        firsts.setdefault(kind, at)
    cited, answer, final_action = cited_names(outcome.sources), outcome.answer_text, outcome.final_action
    if replayed is not None:
        answer, final_action = replayed.text, "no_answer" if replayed.retracted else "normal"
        cited = cited_names([{"document_id": d} for d in replayed.document_ids])
    intent = str((outcome.plan or {}).get("user_intent") or "")
    result = CaseResult(
        text=case.text, language=case.language, expected_action=case.expected_action, status=outcome.status,
        final_action=final_action, cited=cited, answer=answer,
        plan_s=_seconds(begun, firsts.get("plan")), first_token_s=_seconds(begun, firsts.get("token")),
        done_s=_seconds(begun, firsts.get("done")) if turn.is_finished else None,
        supported_share=(turn.answer_result or {}).get("supported_share"),
        relevance=(turn.answer_result or {}).get("relevance"), intent=intent,
        intent_echo=bool(intent) and intent_echoes_example(intent=intent, message=case.text),
    )
    if case.expected_action == "normal":
        result.cites_expected = bool(case.expected_article) and case.expected_article in cited
        result.facts_found = [fact for fact in case.key_facts if fact_present(fact, answer)]
        result.has_facts = len(result.facts_found) == len(case.key_facts)
        result.refused = final_action in REFUSALS
        result.wrong_number = not result.refused and wrong_number_stated(case, answer)
        result.precise_citations = sum(name == case.expected_article for name in cited)
    elif case.expected_action == "no_answer":
        result.false_answer = final_action == "normal" and bool(cited)
    return result


REFUSALS = ("no_answer", "block", "guardian_block", "handoff")  # a covered question not answered
# An uncovered question is rightly not answered: told so, or handed to a person (who can help where the
# knowledge base cannot). The turn then waits for staff (status ``human``): not a failure.
NOT_ANSWERED = ("no_answer", "handoff")


def _seconds(begun: Any, at: Any) -> float | None:
    return None if at is None else round((at - begun).total_seconds(), 2)


def _percentile(values: list[float], q: float) -> float | None:
    return percentile(values, q) if values else None


def _share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


def language_report(language: str, results: list[CaseResult]) -> LanguageReport:
    answered = [r for r in results if r.expected_action == "normal"]
    uncovered = [r for r in results if r.expected_action == "no_answer"]
    kept = [r for r in answered if not r.refused]
    cited = sum(len(r.cited) for r in answered)
    shares = [r.supported_share for r in results if r.supported_share is not None]
    no_answer = [r for r in results if r.final_action == "no_answer"]
    no_answer_done = [r.done_s for r in no_answer if r.done_s is not None]
    before = [r for r in no_answer if r.first_token_s is None]
    trust = {
        "uncovered": len(uncovered),
        "false_answers": _share([bool(r.false_answer) for r in uncovered]),
        "over_refusal": _share([bool(r.refused) for r in answered]),
        "answered_without_facts": _share([not r.has_facts for r in kept]),
        "answered_with_wrong_number": _share([bool(r.wrong_number) for r in kept]),
        "citation_precision": round(sum(r.precise_citations for r in answered) / cited, 3) if cited else None,
        "supported_share_mean": round(sum(shares) / len(shares), 3) if shares else None,
        "intent_echo": _share([r.intent_echo for r in results if r.intent]),
        "no_answer_done_p50": _percentile(no_answer_done, 50),
        "no_answer_before": len(before),
        "no_answer_before_plan": sum(r.plan_s is None for r in before),
        "no_answer_retracted": len(no_answer) - len(before),
        "no_answer_before_done_p50": _percentile([r.done_s for r in before if r.done_s is not None], 50),
    }
    plan = [r.plan_s for r in results if r.plan_s is not None]
    first = [r.first_token_s for r in answered if r.first_token_s is not None]
    done = [r.done_s for r in answered if r.done_s is not None]
    return LanguageReport(
        language=language, turns=len(results),
        right_action=_share([r.final_action == r.expected_action
                             or (r.expected_action == "no_answer" and r.final_action in NOT_ANSWERED)
                             for r in results]) or 0.0,
        cites_expected=_share([bool(r.cites_expected) for r in answered]),
        key_facts=_share([bool(r.has_facts) for r in answered]), answered=len(answered),
        plan_p50=_percentile(plan, 50), plan_p95=_percentile(plan, 95),
        first_token_p50=_percentile(first, 50), first_token_p95=_percentile(first, 95),
        done_p50=_percentile(done, 50), done_p95=_percentile(done, 95),
        failed=sum(r.status not in (Turn.Status.DONE, Turn.Status.BLOCKED, Turn.Status.CLARIFYING, Turn.Status.HUMAN)
                   for r in results),
        **trust,
    )


def answers_evaluate(cases: list[AnswerCase], *, timeout: float,
                     progress: Callable[[CaseResult], None] | None = None,
                     run: Callable[..., CaseResult] = case_run) -> tuple[list[LanguageReport], list[CaseResult]]:
    results: list[CaseResult] = []
    for case in cases:
        result = run(case, timeout=timeout)
        results.append(result)
        if progress is not None:
            progress(result)
    languages = list(dict.fromkeys(r.language for r in results))
    return [language_report(lang, [r for r in results if r.language == lang]) for lang in languages], results


def reports_format(reports: list[LanguageReport]) -> str:
    def pct(value: float | None) -> str:
        return "—" if value is None else f"{100 * value:.0f} %"

    def sec(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    lines = ["| language | turns | right action | cites expected article | key facts | plan line p50 / p95 s "
             "| first token p50 / p95 s | done p50 / p95 s | failed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in reports:
        lines.append(f"| {r.language} | {r.turns} | {pct(r.right_action)} | {pct(r.cites_expected)} of {r.answered} "
                     f"| {pct(r.key_facts)} | {sec(r.plan_p50)} / {sec(r.plan_p95)} "
                     f"| {sec(r.first_token_p50)} / {sec(r.first_token_p95)} | {sec(r.done_p50)} / {sec(r.done_p95)} "
                     f"| {r.failed} |")
    lines += ["", "| language | uncovered | false answers | over-refusal | answered without the facts "
              "| a wrong number stated | citation precision | supported share | intent echoes an example "
              "| no_answer done p50 s | no_answer before the answer (of them before the plan) / retracted after it, "
              "before's done p50 s |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in reports:
        share = "—" if r.supported_share_mean is None else f"{r.supported_share_mean:.2f}"
        lines.append(f"| {r.language} | {r.uncovered} | {pct(r.false_answers)} | {pct(r.over_refusal)} "
                     f"| {pct(r.answered_without_facts)} | {pct(r.answered_with_wrong_number)} "
                     f"| {pct(r.citation_precision)} | {share} "
                     f"| {pct(r.intent_echo)} | {sec(r.no_answer_done_p50)} "
                     f"| {r.no_answer_before} ({r.no_answer_before_plan} before the plan) / {r.no_answer_retracted}, "
                     f"{sec(r.no_answer_before_done_p50)} |")
    return "\n".join(lines)
