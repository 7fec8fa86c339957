"""Confidence calibration: cut points that meet the off-topic and in-scope targets, and the command."""

from __future__ import annotations

import io
import json
import math
import re

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from retrieval.calibration import OFF_TOPIC_DEFAULT, cut_points, off_topic_load, sigmoid_through
from retrieval.ingestion import kb_ingest_paths

RNG = np.random.default_rng(16)


def test_cut_points_meet_both_targets_when_the_sets_separate():
    in_scope = RNG.normal(0.90, 0.02, 400)
    off_topic = RNG.normal(0.80, 0.02, 300)
    likely, high, met = cut_points(in_scope, off_topic, max_off_topic=0.05, min_in_scope=0.95)
    assert met and likely < high
    for cut in (likely, high):
        assert np.mean(off_topic >= cut) <= 0.05 and np.mean(in_scope >= cut) >= 0.95


def test_overlapping_sets_keep_the_off_topic_limit_and_say_the_targets_are_not_met():
    in_scope = RNG.normal(0.85, 0.03, 400)
    off_topic = RNG.normal(0.84, 0.03, 300)
    likely, high, met = cut_points(in_scope, off_topic, max_off_topic=0.05, min_in_scope=0.95)
    assert not met and likely == high
    assert np.mean(off_topic >= likely) <= 0.05 and np.mean(in_scope >= likely) < 0.95


def test_the_sigmoid_goes_through_both_cut_points():
    midpoint, slope = sigmoid_through(0.84, 0.86, likely_at=0.5, high_at=0.7)
    relevance = [1 / (1 + math.exp(-slope * (c - midpoint))) for c in (0.84, 0.86)]
    assert relevance == pytest.approx([0.5, 0.7], abs=1e-6)


def test_the_shipped_off_topic_set_has_both_languages_and_spam():
    texts = off_topic_load(OFF_TOPIC_DEFAULT)
    assert len(texts) >= 150
    assert any(re.search("[а-я]", t) for t in texts) and any(re.fullmatch(r"[^а-яА-Я]+", t) for t in texts)
    assert any("!!!" in t for t in texts)


KB = {
    "refunds.md": "# Refunds\n\nRefunds go back to the original card within ten business days.",
    "delivery.md": "# Доставка\n\nСтандартная доставка занимает от трёх до пяти рабочих дней.",
    "password.md": "# Password reset\n\nTo reset your password, click Forgot password on the sign-in page.",
    "plans.md": "# Subscription plans\n\nYou can cancel or change your plan at any time in Billing settings.",
}
QUESTIONS = [
    "When will I get my money back?", "How long does a refund take?", "Is the refund paid to my card?",
    "I returned an item, where is my refund?", "Сколько идёт доставка?", "Когда привезут мой заказ?",
    "За сколько дней доставляете?", "Какие сроки стандартной доставки?", "I forgot my password",
    "How do I reset my password?", "I can't sign in, how do I change my password?", "Где сбросить пароль?",
    "How do I cancel my subscription?", "Can I switch to another plan?", "Where are billing settings?",
    "Как отменить подписку?", "Как поменять тариф?", "Can I get a refund to my credit card?",
    "Сколько рабочих дней занимает доставка?", "Forgot password link does not work",
]


@pytest.mark.django_db
def test_the_command_prints_figures_and_settings_meeting_the_off_topic_limit(local_embedder, write_files, tmp_path):
    kb_ingest_paths(paths=[str(write_files(KB))])
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps({"question": q}, ensure_ascii=False) for q in QUESTIONS),
                         encoding="utf-8")
    out = io.StringIO()
    call_command("calibrate_confidence", "--questions", str(questions), "--no-progress", stdout=out)
    text = out.getvalue()
    assert "in-scope questions: 20, off-topic texts: 183" in text
    calibrated = text.split("calibrated:")[1].split("held out")[0]
    passes = [float(x) for x in re.findall(r"off-topic pass\s+([\d.]+)%", calibrated)]
    assert len(passes) == 2 and all(p <= 5.0 for p in passes)
    midpoint = float(re.search(r"RETRIEVAL_CONFIDENCE_MIDPOINT=([\d.]+)", text).group(1))
    slope = float(re.search(r"RETRIEVAL_CONFIDENCE_SLOPE=([\d.]+)", text).group(1))
    assert 0.5 < midpoint < 1.0 and slope > 0


@pytest.mark.django_db
def test_the_command_refuses_too_few_texts_an_empty_kb_and_a_bad_file(stub_embedder, tmp_path):
    few = tmp_path / "few.jsonl"
    few.write_text('{"question": "only one"}\n', encoding="utf-8")
    with pytest.raises(CommandError, match="at least 20 texts"):
        call_command("calibrate_confidence", "--questions", str(few), stdout=io.StringIO())
    enough = tmp_path / "enough.jsonl"
    enough.write_text("\n".join(json.dumps({"question": q}) for q in QUESTIONS), encoding="utf-8")
    with pytest.raises(CommandError, match="knowledge base is empty"):
        call_command("calibrate_confidence", "--questions", str(enough), stdout=io.StringIO())
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "fine"}\n{"nothing": 1}\n', encoding="utf-8")
    with pytest.raises(CommandError, match="bad.jsonl:2"):
        call_command("calibrate_confidence", "--questions", str(bad), stdout=io.StringIO())
