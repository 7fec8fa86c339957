"""Fit the retrieval-confidence scale (retrieval/confidence.py) for the configured embedder.

Usage: ./sd bench scripts/calibrate_confidence.py [scripts/data/calibration.jsonl]

For every message of the calibration set (in-scope questions and off-topic
messages) it takes the best cosine against all passages, fits
``P(in scope) = sigmoid(slope * (cosine - midpoint))`` by logistic regression
(Newton's method) and prints the fit, AUROC and a cosine → relevance table.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import django
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportdesk.settings")
django.setup()

from retrieval.embedders import embedder_get  # noqa: E402


def auroc(positive: np.ndarray, negative: np.ndarray) -> float:
    wins = (positive[:, None] > negative[None, :]).sum() + 0.5 * (positive[:, None] == negative[None, :]).sum()
    return float(wins / (len(positive) * len(negative)))


def logistic_fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> tuple[float, float]:
    """(midpoint, slope) of the maximum-likelihood 1-D logistic regression (small ridge for stability)."""
    w = np.zeros(2)
    design = np.column_stack([np.ones_like(x), x])
    for _ in range(100):
        p = 1 / (1 + np.exp(-design @ w))
        gradient = design.T @ (y - p) - l2 * w
        hessian = -(design.T * (p * (1 - p))) @ design - l2 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    bias, slope = w
    return float(-bias / slope), float(slope)


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "data" / "calibration.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    passages = [r for r in rows if r["kind"] == "passage"]
    messages = [r for r in rows if r["kind"] != "passage"]
    embedder = embedder_get()
    passage_vectors = embedder.embed_passages([p["text"] for p in passages])
    message_vectors = embedder.embed_queries([m["text"] for m in messages])
    similarity = message_vectors @ passage_vectors.T
    best = similarity.max(axis=1)
    labels = np.array([1.0 if m["kind"] == "in_scope" else 0.0 for m in messages])
    own_top1 = np.mean([passages[int(similarity[i].argmax())]["id"] == m["passage"]
                        for i, m in enumerate(messages) if m["kind"] == "in_scope"])
    midpoint, slope = logistic_fit(best, labels)
    predicted = 1 / (1 + np.exp(-slope * (best - midpoint)))
    print(f"embedder: {embedder.name}")
    print(f"passages: {len(passages)}, in-scope: {int(labels.sum())}, off-topic: {int((1 - labels).sum())}")
    print(f"best cosine, in-scope:  mean {best[labels == 1].mean():.3f}  min {best[labels == 1].min():.3f}")
    print(f"best cosine, off-topic: mean {best[labels == 0].mean():.3f}  max {best[labels == 0].max():.3f}")
    print(f"AUROC (best cosine, in-scope vs off-topic): {auroc(best[labels == 1], best[labels == 0]):.3f}")
    print(f"own passage ranked first for in-scope questions: {own_top1:.2f}")
    print(f"logistic fit: midpoint {midpoint:.4f}  slope {slope:.2f}")
    print(f"accuracy at relevance 0.5: {np.mean((predicted >= 0.5) == (labels == 1)):.3f}")
    print("cosine -> relevance: " + ", ".join(
        f"{c:.2f}->{1 / (1 + np.exp(-slope * (c - midpoint))):.2f}" for c in np.arange(0.70, 0.941, 0.03)))


if __name__ == "__main__":
    main()
