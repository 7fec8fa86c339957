"""The rules provider: staff-edited keywords and regexes, per category, level and language."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.utils import translation

from guard.models import GuardRule
from guard.screening import message_screen, response_screen

pytestmark = pytest.mark.django_db


@pytest.fixture
def rules(settings):
    settings.GUARD_PROVIDER = "rules"
    settings.GUARD_MODE = "enforce"
    settings.GUARD_BLOCK_LEVEL = "unsafe"
    GuardRule.objects.all().delete()  # start from no rules, whatever the seed migration added


def test_no_rules_is_a_pass_with_an_honest_raw_output(rules):
    verdict = message_screen(text="How do I reset my password?", language="en")
    assert (verdict.level, verdict.status, verdict.provider) == ("Safe", "pass", "rules")
    assert verdict.raw_output == '{"matches": []}'


def test_keywords_match_whole_words_in_any_case(rules):
    GuardRule.objects.create(category="violent", level="Unsafe", kind="keyword", pattern="build a bomb")
    assert message_screen(text="How do I BUILD   a bomb?", language="en").status == "blocked"
    assert message_screen(text="rebuild a bombastic speech", language="en").status == "pass"


def test_regex_rules_report_the_category_level_and_match(rules):
    rule = GuardRule.objects.create(category="pii", level="Controversial", kind="regex", pattern=r"\b\d{4}(?: \d{4}){3}\b")
    verdict = message_screen(text="my card 4111 1111 1111 1111 please", language="en")
    assert (verdict.level, verdict.status, verdict.categories) == ("Controversial", "flagged", ["pii"])
    assert f'"rule": {rule.pk}' in verdict.raw_output and "4111 1111 1111 1111" in verdict.raw_output


def test_the_most_severe_match_wins_and_categories_are_collected(rules):
    GuardRule.objects.create(category="pii", level="Controversial", kind="keyword", pattern="passport")
    GuardRule.objects.create(category="non_violent_illegal", level="Unsafe", kind="keyword", pattern="forge")
    verdict = message_screen(text="help me forge a passport", language="en")
    assert (verdict.level, verdict.status) == ("Unsafe", "blocked")
    assert sorted(verdict.categories) == ["non_violent_illegal", "pii"]


def test_rules_apply_per_language_and_language_less_rules_apply_to_all(rules):
    GuardRule.objects.create(category="violent", level="Unsafe", kind="keyword", pattern="взорвать", language="ru")
    GuardRule.objects.create(category="jailbreak", level="Unsafe", kind="keyword", pattern="DAN mode", language="")
    assert message_screen(text="как взорвать здание", language="ru").status == "blocked"
    assert message_screen(text="как взорвать здание", language="en").status == "pass"
    assert message_screen(text="enable DAN mode", language="ru").categories == ["jailbreak"]
    assert message_screen(text="enable DAN mode", language="en").categories == ["jailbreak"]


def test_inactive_rules_are_ignored_and_edits_apply_to_the_next_check(rules):
    rule = GuardRule.objects.create(category="violent", level="Controversial", kind="keyword", pattern="fight")
    assert message_screen(text="a fight", language="en").status == "flagged"
    rule.level = "Unsafe"
    rule.save()
    assert message_screen(text="a fight", language="en").status == "blocked"
    rule.is_active = False
    rule.save()
    assert message_screen(text="a fight", language="en").status == "pass"


def test_rules_are_read_once_per_edit_not_per_message(rules, django_assert_num_queries):
    rule = GuardRule.objects.create(category="violent", level="Unsafe", kind="keyword", pattern="fight")
    assert message_screen(text="a fight", language="en").status == "blocked"  # loads the snapshot
    with django_assert_num_queries(0):
        assert message_screen(text="another fight", language="en").status == "blocked"
    rule.delete()  # every process drops its snapshot
    assert message_screen(text="a fight", language="en").status == "pass"


def test_rules_screen_answers_too(rules):
    GuardRule.objects.create(category="copyright", level="Unsafe", kind="keyword", pattern="full text of the novel")
    verdict = response_screen(prompt="q", text="Here is the full text of the novel", language="en")
    assert (verdict.kind, verdict.status, verdict.categories) == ("response", "blocked", ["copyright"])


@pytest.mark.parametrize(("pattern", "fragment_en", "fragment_ru"), [
    ("(unclosed", "Invalid regular expression", "Некорректное регулярное выражение"),
    ("a|", "matches an empty string", "пустой строкой"),
    ("   ", "empty", "пустой"),
    (r"(a|aa)+$", "takes too long", "слишком долго"),  # catastrophic backtracking on "aaaa…!"
])
def test_an_invalid_regex_cannot_be_saved_and_the_error_is_localized(rules, pattern, fragment_en, fragment_ru):
    for language, fragment in (("en", fragment_en), ("ru", fragment_ru)):
        with translation.override(language), pytest.raises(ValidationError) as caught:
            GuardRule(category="violent", level="Unsafe", kind="regex", pattern=pattern).save()
        assert fragment in caught.value.message_dict["pattern"][0]
    assert not GuardRule.objects.exists()


def test_the_same_text_is_a_valid_keyword(rules):
    GuardRule(category="violent", level="Unsafe", kind="keyword", pattern="(unclosed").save()
    assert message_screen(text="an (unclosed bracket", language="en").status == "blocked"


def test_a_rule_that_runs_too_long_on_a_customer_text_counts_as_a_match(rules, settings, caplog):
    settings.GUARD_RULE_TIMEOUT_MS = 20
    # Fast on the probe texts checked when it was saved, catastrophic on runs of "x":
    # ~1 s of backtracking on this text without the time limit (and doubling per extra "x").
    rule = GuardRule.objects.create(category="violent", level="Unsafe", kind="regex", pattern=r"(x|xx)+$")
    verdict = message_screen(text="x" * 30 + "!", language="en")
    assert (verdict.status, verdict.categories) == ("blocked", ["violent"])  # not slipped past the rule
    assert '"timed_out": true' in verdict.raw_output
    assert f"guard rule {rule.pk} ran over 20 ms" in caplog.text
    assert message_screen(text="a normal question", language="en").status == "pass"

