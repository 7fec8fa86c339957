"""The linear classifier over exemplar vectors and the exemplar screen's decision modes (issue 30)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from guard.classifier import LinearClassifier, classifier_fit
from guard.exemplars import ExemplarSet, ExemplarSettings, exemplar_settings, exemplars_load, exemplars_score
from retrieval.embedders import embedder_get

ROOT = Path(__file__).resolve().parents[2]
SEEDS = sorted((ROOT / "guard" / "migrations" / "data").glob("*_exemplars.json"))
HELD_OUT = ROOT / "guard" / "devset" / "guard_heldout.jsonl"
BROAD = ROOT / "guard" / "migrations" / "data" / "0007_exemplars.json"


def _clusters(n: int = 40, dim: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    centre = np.zeros(dim)
    centre[0] = 1.0
    harmful = rng.normal(size=(n, dim)) * 0.3 + centre
    allowed = rng.normal(size=(n, dim)) * 0.3 - centre
    return np.vstack([harmful, allowed]).astype(np.float32), np.array([True] * n + [False] * n)


def test_the_classifier_separates_what_it_was_fitted_on_and_generalises_to_new_points():
    vectors, harmful = _clusters()
    model = classifier_fit(vectors, harmful, l2=1.0)
    assert model is not None
    fresh, fresh_harmful = _clusters(n=20)
    fresh = fresh[::-1] * 1.1  # other points of the same two clusters
    p = model.probability(fresh)
    assert ((p >= 0.5) == fresh_harmful[::-1]).mean() >= 0.95
    assert 0.0 < float(model.probability(np.zeros(16, dtype=np.float32))) < 1.0


def test_without_both_kinds_of_exemplar_there_is_no_classifier():
    vectors, harmful = _clusters()
    assert classifier_fit(vectors[:40], harmful[:40]) is None
    assert classifier_fit(vectors[:0], harmful[:0]) is None


def _set_with(bias: float) -> tuple[ExemplarSet, np.ndarray]:
    """Exemplars the nearest-neighbour margin flags the message against, and a constant classifier."""
    message = np.zeros(8, dtype=np.float32)
    message[0] = 1.0
    rng = np.random.default_rng(5)
    rows = []
    for similarity in (0.90, 0.90, 0.85, 0.85):
        other = rng.normal(size=8)
        other[0] = 0.0
        other /= np.linalg.norm(other)
        rows.append(similarity * message + np.sqrt(1.0 - similarity ** 2) * other)
    levels = ["Unsafe", "Unsafe", "Allowed", "Allowed"]
    constant = LinearClassifier(mean=np.zeros(8, np.float32), scale=np.ones(8, np.float32),
                                weights=np.zeros(8, np.float32), bias=bias)
    return ExemplarSet(ids=[1, 2, 3, 4], texts=["a", "b", "c", "d"], levels=levels,
                       categories=["violent", "violent", "", ""], vectors=np.vstack(rows).astype(np.float32),
                       harmful=np.array([True, True, False, False]), classifier=constant), message


CONFIG = ExemplarSettings(threshold=0.84, margin=0.006, k=2, near=0.95, keep=5)


@pytest.mark.parametrize(("decision", "bias", "flagged"), [
    ("margin", -4.0, True),  # the classifier is not asked
    ("classifier", -4.0, False),  # P(harmful) 0.02
    ("classifier", 4.0, True),
    ("both", -4.0, False),  # the margin flags, the classifier does not
    ("both", 4.0, True),
])
def test_the_decision_mode_chooses_who_flags(decision, bias, flagged):
    exemplars, message = _set_with(bias)
    scored = exemplars_score(vector=message, exemplars=exemplars, config=replace(CONFIG, decision=decision))
    assert scored.flagged is flagged
    assert (scored.score >= 0.5) is flagged


def test_the_classifier_threshold_is_the_score_s_boundary():
    exemplars, message = _set_with(0.0)  # P(harmful) = 0.5
    assert exemplars_score(vector=message, exemplars=exemplars,
                           config=replace(CONFIG, decision="classifier", classifier_threshold=0.4)).flagged
    assert not exemplars_score(vector=message, exemplars=exemplars,
                               config=replace(CONFIG, decision="classifier", classifier_threshold=0.6)).flagged


@pytest.mark.parametrize(("name", "value"), [("GUARD_EXEMPLAR_DECISION", "vote"),
                                             ("GUARD_EXEMPLAR_CLASSIFIER_THRESHOLD", 1.0)])
def test_invalid_decision_settings_are_refused_by_name(settings, name, value):
    setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured, match=name):
        exemplar_settings()


@pytest.mark.django_db
def test_the_snapshot_carries_a_classifier_fitted_on_the_seeded_exemplars():
    exemplars = exemplars_load(embedder_get())
    assert exemplars.classifier is not None
    p = exemplars.classifier.probability(exemplars.vectors)
    # Fitted on them: it ranks the seeded harmful exemplars above the allowed ones.
    assert p[exemplars.harmful].mean() > 0.7 > 0.3 > p[~exemplars.harmful].mean()


def test_the_held_apart_dev_file_is_never_seeded_and_covers_every_source_in_both_languages():
    seeded = {t.strip().lower() for path in SEEDS
              for g in json.loads(path.read_text(encoding="utf-8"))["groups"] for t in g["texts"]}
    rows = [json.loads(line) for line in HELD_OUT.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert not [row["text"] for row in rows if row["text"].strip().lower() in seeded]
    broad = json.loads(BROAD.read_text(encoding="utf-8"))["groups"]
    sources = {g["source"] for g in broad}
    assert len(sources) >= 12 and sum(len(g["texts"]) for g in broad) >= 350
    for language in ("en", "ru"):
        held = [r for r in rows if r["language"] == language]
        assert {r["source"] for r in held if r["expected"] == "safe"} == sources
        assert sum(r["expected"] == "safe" for r in held) >= 140
        assert sum(r["expected"] == "unsafe" for r in held) >= 40
