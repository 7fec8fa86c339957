"""Cross-validation of the exemplar screen's decision across sources (issue 30).

Usage: ./sd bench scripts/guard_crossval.py [--l2 30 ...] [--thresholds 0.5 0.7 ...] [--without "sixth set" | --unscored "sixth set"]
       [--or-above 0.9 0.95 ...]

Every active exemplar belongs to a *source*: its seed set (the note) and, for harmful ones,
its category ("starter set/violent", "fourth set: support_banking", "fifth set: harmful_pii"); English and Russian
versions of one source stay together, so a translation never leaks across folds. Each source
in turn is held out: the nearest-neighbour margin (``exemplars_score`` with the configured
``GUARD_EXEMPLAR_*``) and the logistic classifier (``guard.classifier``) are fitted on the
others and decide on it. Printed per source: how many of its texts each decision flags (the
catch rate of a harmful source, the false-flag rate of an allowed one); and the macro averages
over harmful and allowed sources, for each ridge strength, threshold and combination
(``margin``, ``classifier``, ``both``), overall and per language. ``--without PREFIX`` leaves out
the exemplars whose note starts with it and ``--unscored PREFIX`` fits on them but leaves their sources out of the averages: the two
compare what a seed set adds on the same held-out sources. ``--flagged FILE`` writes the texts the
best decision flagged while their source was held out, as a labelled file for
``manage.py evaluate_guard --judge-only``: the fitting data's flags, on which the judge's prompt and
``GUARD_JUDGE_THRESHOLD`` are chosen. The held-apart dev file is not read: choose here,
report there (``manage.py evaluate_guard --file guard/devset/guard_heldout.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402

from guard.classifier import classifier_fit  # noqa: E402
from guard.exemplars import ExemplarSet, exemplar_settings, exemplars_load, exemplars_score  # noqa: E402
from guard.models import GuardExemplar  # noqa: E402
from retrieval.embedders import embedder_get  # noqa: E402


def source_of(note: str, level: str, category: str) -> str:
    if note.startswith(("fourth set", "fifth set", "sixth set", "seventh set", "eighth set", "ninth set")):
        return note  # one source per group of the broad benign set and of the fifth to ninth sets
    return f"{note or 'staff'}/{category if level != 'Allowed' else 'allowed'}"


def subset(exemplars: ExemplarSet, keep: np.ndarray) -> ExemplarSet:
    index = np.flatnonzero(keep)
    return replace(
        exemplars, ids=[exemplars.ids[i] for i in index], texts=[exemplars.texts[i] for i in index],
        levels=[exemplars.levels[i] for i in index], categories=[exemplars.categories[i] for i in index],
        vectors=exemplars.vectors[index], harmful=exemplars.harmful[index], classifier=None,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--l2", type=float, nargs="+", default=[3.0, 10.0, 30.0, 100.0])
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 0.9])
    parser.add_argument("--without", default="", help="leave out the exemplars whose note starts with this")
    parser.add_argument("--unscored", default="", help="fit on, but do not average over, the sources starting so")
    parser.add_argument("--flagged", default="", help="write the texts the best decision flagged here (JSONL)")
    parser.add_argument("--band", default="",
                        help="write the texts only one of the margin and the classifier (first l2 and threshold) flagged")
    parser.add_argument("--or-above", type=float, nargs="*", default=[],
                        help="also print 'both, or the classifier alone at or above P' for each P")
    args = parser.parse_args()
    started = time.perf_counter()
    exemplars = exemplars_load(embedder_get())
    print(f"{len(exemplars.ids)} exemplars loaded in {time.perf_counter() - started:.1f} s")
    meta = dict(GuardExemplar.objects.filter(pk__in=exemplars.ids).values_list("pk", "note"))
    languages = dict(GuardExemplar.objects.filter(pk__in=exemplars.ids).values_list("pk", "language"))
    if args.without:
        exemplars = subset(exemplars, np.array([not meta.get(i, "").startswith(args.without) for i in exemplars.ids]))
        print(f"{len(exemplars.ids)} exemplars without those whose note starts with {args.without!r}")
    language = np.array([languages.get(i, "") for i in exemplars.ids])
    sources = np.array([source_of(meta.get(i, ""), level, category) for i, level, category
                        in zip(exemplars.ids, exemplars.levels, exemplars.categories, strict=True)])
    margin_config = replace(exemplar_settings(), decision="margin")
    names = sorted(set(sources))
    margin_flags: dict[str, np.ndarray] = {}
    probabilities: dict[tuple[str, float], np.ndarray] = {}
    fit_seconds: list[float] = []
    for name in names:
        held = sources == name
        train = subset(exemplars, ~held)
        margin_flags[name] = np.array([exemplars_score(vector=v, exemplars=train, config=margin_config).flagged
                                       for v in exemplars.vectors[held]])
        for l2 in args.l2:
            fit_started = time.perf_counter()
            model = classifier_fit(train.vectors, train.harmful, l2=l2)
            fit_seconds.append(time.perf_counter() - fit_started)
            assert model is not None
            probabilities[(name, l2)] = model.probability(exemplars.vectors[held])
    scored = [n for n in names if not (args.unscored and n.startswith(args.unscored))]
    harmful_sources = [n for n in scored if exemplars.harmful[sources == n].all()]
    allowed_sources = [n for n in scored if n not in harmful_sources]
    print(f"{len(names)} sources ({len(harmful_sources)} harmful, {len(allowed_sources)} allowed); "
          f"one fit: {np.median(fit_seconds) * 1000:.0f} ms median")

    def rate(flags: dict[str, np.ndarray], group: list[str], lang: str = "") -> float:
        """The macro average of ``flags`` over the sources of ``group`` (their texts in ``lang`` only, if given)."""
        means = [flags[n][language[sources == n] == lang].mean() if lang else flags[n].mean() for n in group
                 if not lang or (language[sources == n] == lang).any()]
        return float(np.mean(means))

    def line(label: str, flags: dict[str, np.ndarray]) -> str:
        by_language = "".join(f"{rate(flags, harmful_sources, lang):>9.1%}{rate(flags, allowed_sources, lang):>9.1%}"
                              for lang in ("en", "ru"))
        return f"{label:<34}{rate(flags, harmful_sources):>15.1%}{rate(flags, allowed_sources):>17.1%}{by_language}"

    print(f"\n{'decision':<34}{'harmful caught':>16}{'allowed flagged':>17}{'en caught':>10}{'flagged':>8}"
          f"{'ru caught':>10}{'flagged':>8}   (macro average over held-out sources)")
    print(line("margin (nearest neighbours)", margin_flags))
    best: tuple[float, str, dict[str, np.ndarray]] | None = None
    for l2 in args.l2:
        for threshold in args.thresholds:
            alone = {n: probabilities[(n, l2)] >= threshold for n in names}
            both = {n: alone[n] & margin_flags[n] for n in names}
            for label, flags in ((f"classifier l2={l2:g} t={threshold:g}", alone),
                                 (f"both l2={l2:g} t={threshold:g}", both)):
                caught, flagged = rate(flags, harmful_sources), rate(flags, allowed_sources)
                print(line(label, flags))
                if best is None or caught - 3 * flagged > best[0]:
                    best = (caught - 3 * flagged, label, flags)
    for l2 in args.l2:  # a very confident classifier flagging without the margin's agreement
        for above in args.or_above:
            for threshold in args.thresholds:
                either = {n: (probabilities[(n, l2)] >= threshold) & margin_flags[n] | (probabilities[(n, l2)] >= above)
                          for n in names}
                print(line(f"both t={threshold:g} or p>={above:g} l2={l2:g}", either))
    assert best is not None

    def write(path: str, chosen: dict[str, np.ndarray]) -> None:
        """The held-out texts ``chosen`` picks, as a labelled file for ``evaluate_guard --judge-only``."""
        with open(path, "w", encoding="utf-8") as out:
            for name in harmful_sources + allowed_sources:
                held = np.flatnonzero(sources == name)
                for index in held[chosen[name]]:
                    out.write(json.dumps({"text": exemplars.texts[index], "language": language[index], "source": name,
                                          "expected": "unsafe" if exemplars.harmful[index] else "safe"},
                                         ensure_ascii=False) + "\n")

    if args.flagged:
        write(args.flagged, best[2])
        print(f"the texts flagged by {best[1]} written to {args.flagged}")
    if args.band:
        first = (args.l2[0], args.thresholds[0])
        write(args.band, {n: (probabilities[(n, first[0])] >= first[1]) != margin_flags[n] for n in names})
        print(f"the texts only one of the margin and the classifier (l2 {first[0]:g}, t {first[1]:g}) flagged "
              f"written to {args.band}")
    print(f"\nper source, margin vs {best[1]} (best by caught - 3 x flagged), then its flags per language:")
    for name in harmful_sources + allowed_sources:
        kind = "harmful" if name in harmful_sources else "allowed"
        print(f"  {kind:<8}{name:<48}{int((sources == name).sum()):>5}"
              f"{margin_flags[name].mean():>9.1%}{best[2][name].mean():>9.1%}"
              + "".join(f"  {lang} {int(best[2][name][language[sources == name] == lang].sum())}"
                        f"/{int((language[sources == name] == lang).sum())}" for lang in ("en", "ru")))


if __name__ == "__main__":
    main()
