"""Extraction: the prompt and the strict reading of the model's answer (host:turn-loop)."""

from __future__ import annotations

import pytest

from almanac.host import EXTRACTION_PROMPT, ExtractionError, extraction_messages, parse_facts

pytestmark = pytest.mark.req("host:turn-loop")


def test_the_prompt_asks_for_at_most_three_facts_and_allows_none() -> None:
    messages = extraction_messages("I use tabs", "Noted.")
    assert messages[0] == {"role": "system", "content": EXTRACTION_PROMPT}
    assert "At most 3" in EXTRACTION_PROMPT and '{"facts": []}' in EXTRACTION_PROMPT
    assert "User:\nI use tabs" in messages[1]["content"] and "Assistant:\nNoted." in messages[1]["content"]


@pytest.mark.parametrize(
    ("answer", "facts"),
    [
        ('{"facts": []}', []),
        ('  {"facts": ["The user prefers tabs."]}\n', ["The user prefers tabs."]),
        ('{"facts": ["A.", "B.", "C."]}', ["A.", "B.", "C."]),
        ('```json\n{"facts": ["The user   lives in\\nOslo."]}\n```', ["The user lives in Oslo."]),
        ('{"facts": ["Same.", "same."]}', ["Same."]),
    ],
)
def test_well_formed_answers(answer: str, facts: list[str]) -> None:
    assert parse_facts(answer) == facts


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("Nothing worth remembering.", "not JSON"),
        ('["The user prefers tabs."]', '"facts" list'),
        ('{"fact": "x"}', '"facts" list'),
        ('{"facts": "x"}', '"facts" list'),
        ('{"facts": ["a", "b", "c", "d"]}', "at most 3"),
        ('{"facts": [""]}', "non-empty string"),
        ('{"facts": [42]}', "non-empty string"),
        ('{"facts": ["bell \\u0007"]}', "control characters"),
        ('{"facts": ["' + "x" * 4_001 + '"]}', "too long"),
        ('Sure! {"facts": []}', "not JSON"),
    ],
)
def test_malformed_answers_are_refused_whole(answer: str, why: str) -> None:
    with pytest.raises(ExtractionError, match=why):
        parse_facts(answer)
