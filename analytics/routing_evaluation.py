"""Routing evaluation on labelled messages (``manage.py evaluate_routing``).

Each message runs the guardian and the SGR planning step exactly as a live
turn's first message would (same providers, prompt, thresholds and DT-002
routing, no answer stage, nothing stored), and the final action is compared
with the expected one: a confusion matrix and per-class precision, recall and
F1, so staff can compare models, thresholds and prompts on their own data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from guard.screening import message_screen
from sgr.planner import PlanningContext, plan_request
from sgr.routing import route
from sgr.schema import PLAN_ACTIONS, PlanAction
from supportdesk.llm import llm_client
from supportdesk.pipeline.plan import kb_relevance_measure

ERROR = "error"  # the guardian failed closed or the model was unreachable: no routing decision


class LabelledMessage(BaseModel):
    text: str = Field(min_length=1)
    expected_action: PlanAction  # no answer stage runs here, so never no_answer
    language: str = "en"


class LabelledFileError(ValueError):
    """A line of the labelled file is not ``{"text", "expected_action"}``."""


class Prediction(BaseModel):
    action: str
    rule: str = ""
    guardian_status: str = ""
    plan_status: str = ""
    error: str = ""


class ClassMetrics(BaseModel):
    label: str
    precision: float
    recall: float
    f1: float
    support: int


class RoutingReport(BaseModel):
    labels: list[str]
    matrix: list[list[int]]  # rows: expected, columns: predicted, in ``labels`` order
    classes: list[ClassMetrics]
    accuracy: float
    macro_f1: float
    total: int


def labelled_read(path: Path) -> list[LabelledMessage]:
    """The JSONL file's messages; the first bad line is reported by number."""
    if not path.exists():
        raise LabelledFileError(f"File not found: {path}")
    items: list[LabelledMessage] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(LabelledMessage.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise LabelledFileError(
                f"line {number}: expected {{\"text\", \"expected_action\"}} with expected_action one of "
                f"{', '.join(PLAN_ACTIONS)} ({detail})"
            ) from exc
    return items


def routing_predict(*, text: str, language: str) -> Prediction:
    """Guardian then SGR routing for one message, as the first message of a conversation."""
    verdict = message_screen(text=text, language=language)
    if verdict.status == "blocked":
        return Prediction(action="guardian_block", rule="guardian_enforce", guardian_status=verdict.status)
    if verdict.status == "failed_closed":
        return Prediction(action=ERROR, guardian_status=verdict.status, error=verdict.error)
    context = PlanningContext(verdict=verdict, language=language,
                              kb_relevance=kb_relevance_measure(text=text, language=language))
    try:
        outcome = plan_request(client=llm_client(), messages=[{"role": "user", "content": text}], context=context,
                               message_text=text)
    except Exception as exc:  # an unreachable model is counted, not fatal
        return Prediction(action=ERROR, guardian_status=verdict.status, error=f"{type(exc).__name__}: {exc}")
    decision = route(plan=outcome.plan, verdict=verdict, kb_relevance=context.kb_relevance, message=text)
    return Prediction(action=decision.final_action, rule=decision.rule, guardian_status=verdict.status,
                      plan_status=outcome.status)


def routing_metrics(pairs: Iterable[tuple[str, str]]) -> RoutingReport:
    """Confusion matrix and per-class metrics of (expected, predicted) pairs.

    A class never predicted has precision 0 (not undefined), one never expected
    has recall 0; macro F1 averages the classes that occur as expected labels.
    """
    pairs = list(pairs)
    seen = {label for pair in pairs for label in pair}
    labels = [*PLAN_ACTIONS, *sorted(seen - set(PLAN_ACTIONS))]
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for expected, predicted in pairs:
        matrix[index[expected]][index[predicted]] += 1
    classes: list[ClassMetrics] = []
    for label, i in index.items():
        true_positive = matrix[i][i]
        predicted_count = sum(row[i] for row in matrix)
        support = sum(matrix[i])
        precision = true_positive / predicted_count if predicted_count else 0.0
        recall = true_positive / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        classes.append(ClassMetrics(label=label, precision=round(precision, 4), recall=round(recall, 4),
                                    f1=round(f1, 4), support=support))
    total = len(pairs)
    expected_classes = [c for c in classes if c.support]
    return RoutingReport(
        labels=labels, matrix=matrix, classes=classes, total=total,
        accuracy=round(sum(matrix[i][i] for i in range(len(labels))) / total, 4) if total else 0.0,
        macro_f1=round(sum(c.f1 for c in expected_classes) / len(expected_classes), 4) if expected_classes else 0.0,
    )


def routing_evaluate(items: list[LabelledMessage], *,
                     progress: Callable[[int], object] | None = None) -> tuple[RoutingReport, list[Prediction]]:
    predictions: list[Prediction] = []
    for item in items:
        predictions.append(routing_predict(text=item.text, language=item.language))
        if progress:
            progress(1)
    report = routing_metrics((item.expected_action, p.action) for item, p in zip(items, predictions, strict=True))
    return report, predictions


def report_format(report: RoutingReport) -> str:
    """The confusion matrix (rows: expected, columns: predicted) and the per-class table, as plain text."""
    width = max(10, *(len(label) for label in report.labels)) + 2
    lines = [f"Confusion matrix ({report.total} messages; rows: expected, columns: predicted)",
             "".ljust(width) + "".join(label.rjust(width) for label in report.labels)]
    for label, row in zip(report.labels, report.matrix, strict=True):
        lines.append(label.ljust(width) + "".join(str(n).rjust(width) for n in row))
    lines += ["", "class".ljust(width) + "precision".rjust(11) + "recall".rjust(9) + "f1".rjust(9) + "support".rjust(9)]
    for c in report.classes:
        lines.append(c.label.ljust(width) + f"{c.precision:11.3f}{c.recall:9.3f}{c.f1:9.3f}{c.support:9d}")
    lines += ["", f"accuracy {report.accuracy:.3f}   macro F1 {report.macro_f1:.3f}"]
    return "\n".join(lines)
