"""A linear classifier over exemplar vectors: harmful (Unsafe or Controversial) against allowed.

Nearest-neighbour margins of a small embedder are thin (every similarity sits within a few
hundredths), and a decision fitted to them follows the last counter-examples written. A
logistic regression fitted on every exemplar at once weighs all of them: each dimension of
the embedding gets the weight the whole set gives it. Fitted per process with each exemplar
snapshot (a ridge-regularised Newton solve, ~0.2 s for 2,000 exemplars), so a staff edit
refits it like it reloads the vectors. Classes are weighted equally, so 0.5 is the boundary
between two equally likely classes; ``GUARD_EXEMPLAR_CLASSIFIER_THRESHOLD`` moves it.
How well it generalises is checked across sources by ``scripts/guard_crossval.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Ridge strength on standardised features, chosen by cross-validation across sources
# (scripts/guard_crossval.py; docs/benchmarks.md).
L2 = 30.0
NEWTON_STEPS = 25


@dataclass(frozen=True)
class LinearClassifier:
    mean: np.ndarray  # (dim,) feature means of the fitted vectors
    scale: np.ndarray  # (dim,) feature standard deviations
    weights: np.ndarray  # (dim,)
    bias: float

    def probability(self, vectors: np.ndarray) -> np.ndarray:
        """P(harmful) of each row of ``vectors`` (n, dim), or of one vector (dim,)."""
        logits = ((vectors - self.mean) / self.scale) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-np.clip(logits, -50.0, 50.0)))


def classifier_fit(vectors: np.ndarray, harmful: np.ndarray, *, l2: float = L2) -> LinearClassifier | None:
    """Logistic regression of ``harmful`` (bool, n) on ``vectors`` (n, dim); ``None`` without both classes."""
    if vectors.shape[0] == 0 or harmful.all() or not harmful.any():
        return None
    x64 = vectors.astype(np.float64)
    mean = x64.mean(axis=0)
    scale = x64.std(axis=0) + 1e-6
    x = np.hstack([(x64 - mean) / scale, np.ones((x64.shape[0], 1))])
    y = harmful.astype(np.float64)
    # Each class weighs half of the total, whatever the number of exemplars on each side.
    sample = np.where(harmful, 0.5 / harmful.sum(), 0.5 / (~harmful).sum()) * len(y)
    penalty = np.full(x.shape[1], l2)
    penalty[-1] = 0.0  # the bias is not shrunk
    beta = np.zeros(x.shape[1])
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ beta, -50.0, 50.0)))
        gradient = x.T @ (sample * (p - y)) + penalty * beta
        hessian = (x * (sample * p * (1.0 - p))[:, None]).T @ x + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-6:
            break
    return LinearClassifier(mean=mean.astype(np.float32), scale=scale.astype(np.float32),
                            weights=beta[:-1].astype(np.float32), bias=float(beta[-1]))
