"""Extracting durable facts from a finished turn: the prompt and the strict reading of the answer.

The model call itself belongs to the host (see :mod:`almanac.host.openai` for a ready adapter).
"Nothing worth remembering" is the common, normal outcome: ``{"facts": []}``. Anything that is not
exactly the asked-for shape is refused whole (:class:`ExtractionError`) rather than half-trusted.
"""

from __future__ import annotations

import json
import re
import unicodedata

MAX_FACTS = 3
MAX_FACT_CHARS = 4_000  # what Almanac's remember accepts

EXTRACTION_PROMPT = """\
You read one finished exchange between a user and an assistant and pick out durable facts worth \
remembering in later sessions.

A durable fact stays true and will matter later: a preference the user stated, a decision that was \
made, a constraint or detail about the user's work or project, a name they expect to be remembered. \
Not durable: the request of the moment, small talk, what the assistant merely suggested, guesses.

Answer with JSON only, exactly in this shape: {"facts": ["...", "..."]}
- At most 3 facts. Each is one self-contained sentence that makes sense without the conversation; \
call the user "The user".
- Nothing worth remembering is the usual case; then answer {"facts": []}.\
"""

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


class ExtractionError(ValueError):
    """The model's answer was not the asked-for JSON; the message says how it was wrong."""


def extraction_messages(message: str, reply: str) -> list[dict[str, str]]:
    """The chat messages that ask a model for the durable facts of one exchange."""
    exchange = f"User:\n{message}\n\nAssistant:\n{reply}"
    return [{"role": "system", "content": EXTRACTION_PROMPT}, {"role": "user", "content": exchange}]


def _control(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in text)


def parse_facts(answer: str) -> list[str]:
    """The facts in a model's answer (0 to 3, trimmed, without repeats), or :class:`ExtractionError`."""
    text = answer.strip()
    fenced = _FENCE.match(text)  # one fenced block around the JSON is tolerated, nothing else
    if fenced:
        text = fenced.group(1).strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExtractionError(f"the answer is not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("facts"), list):
        raise ExtractionError('the answer must be an object with a "facts" list')
    raw = data["facts"]
    if len(raw) > MAX_FACTS:
        raise ExtractionError(f"the answer has {len(raw)} facts; at most {MAX_FACTS} were asked for")
    facts: list[str] = []
    seen: set[str] = set()
    for fact in raw:
        if not isinstance(fact, str) or not fact.strip():
            raise ExtractionError("every fact must be a non-empty string")
        fact = " ".join(fact.split())
        if len(fact) > MAX_FACT_CHARS or _control(fact):
            raise ExtractionError("a fact is too long or holds control characters")
        if fact.casefold() not in seen:
            seen.add(fact.casefold())
            facts.append(fact)
    return facts
