"""Every provider's labels map onto the one shared taxonomy; raw labels are kept beside them."""

from __future__ import annotations

import pytest

from guard.taxonomy import CATEGORIES, categories_map, category_of

QWEN3GUARD_LABELS = [
    ("Violent", "violent"),
    ("Non-violent Illegal Acts", "non_violent_illegal"),
    ("Sexual Content or Sexual Acts", "sexual"),
    ("PII", "pii"),
    ("Suicide & Self-Harm", "self_harm"),
    ("Unethical Acts", "unethical"),
    ("Politically Sensitive Topics", "politically_sensitive"),
    ("Copyright Violation", "copyright"),
    ("Jailbreak", "jailbreak"),
]
OPENAI_LABELS = [
    ("harassment", "unethical"),
    ("harassment/threatening", "violent"),
    ("hate", "unethical"),
    ("illicit", "non_violent_illegal"),
    ("illicit/violent", "violent"),
    ("self-harm", "self_harm"),
    ("self-harm/intent", "self_harm"),
    ("self-harm/instructions", "self_harm"),
    ("sexual", "sexual"),
    ("sexual/minors", "sexual"),
    ("violence", "violent"),
    ("violence/graphic", "violent"),
]


@pytest.mark.parametrize(("label", "category"), QWEN3GUARD_LABELS + OPENAI_LABELS)
def test_provider_labels_map_to_the_taxonomy(label, category):
    assert category_of(label) == category


def test_every_taxonomy_category_is_reachable_from_qwen3guard_and_maps_to_itself():
    assert {category for _, category in QWEN3GUARD_LABELS} == set(CATEGORIES)
    assert [category_of(name) for name in CATEGORIES] == list(CATEGORIES)


def test_mapping_is_tolerant_of_case_and_spacing_and_deduplicates():
    assert categories_map(["  VIOLENT ", "violence", "suicide  &  self-harm", "Jailbreak"]) == [
        "violent", "self_harm", "jailbreak",
    ]


def test_unknown_labels_are_not_invented_into_categories():
    assert category_of("weather small talk") is None
    assert categories_map(["weather small talk", "PII"]) == ["pii"]
