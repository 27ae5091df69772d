"""The OpenAI-compatible chat adapter against a local fake server speaking that wire format."""

from __future__ import annotations

import pytest

from almanac.host import ModelError, extraction_messages, openai_chat
from tests.almanac.host.fake_chat import running_fake_chat

pytestmark = [pytest.mark.anyio, pytest.mark.req("host:turn-loop")]


async def test_posts_the_messages_and_reads_the_content() -> None:
    with running_fake_chat() as fake:
        fake.extractions = ['{"facts": ["The user prefers tabs."]}']
        chat = openai_chat(fake.base_url, "small-model", api_key="sk-test")
        answer = await chat(extraction_messages("I use tabs", "Noted."))
    assert answer == '{"facts": ["The user prefers tabs."]}'
    (sent,) = fake.extraction_requests
    assert sent["body"]["model"] == "small-model" and sent["body"]["temperature"] == 0.0
    assert sent["headers"]["authorization"] == "Bearer sk-test"


async def test_a_server_error_is_a_model_error() -> None:
    with running_fake_chat() as fake:
        fake.extractions = ["500"]
        with pytest.raises(ModelError, match="500"):
            await openai_chat(fake.base_url, "m")(extraction_messages("a", "b"))


async def test_an_unreachable_endpoint_is_a_model_error(closed_port: int) -> None:
    with pytest.raises(ModelError, match="unreachable"):
        await openai_chat(f"http://127.0.0.1:{closed_port}/v1", "m")([{"role": "user", "content": "hi"}])
