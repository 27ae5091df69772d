"""No lost save: the host library against a real gateway that restarts, is slow and refuses for a
while (host:turn-loop).

Every test runs ``almanac serve`` on a temp data dir, the real MCP client inside
:class:`~almanac.host.MemoryProvider`, and the local fake model server; what is asserted is what
ends up in the workspace's Markdown store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from almanac.host import Endpoint, HostSettings, MemoryProvider, SaveStatus, openai_chat
from tests.almanac.host.fake_chat import FakeChat, running_fake_chat
from tests.engine.support import engine_command, socket_engine
from tests.gateway.e2e import files_containing, start_gateway, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.req("host:turn-loop")]

ADA = "ada@example.com"
FACTS = (
    "The user deploys the Fjord app to Hetzner every Friday.",
    "The user's cat is called Miso.",
    "The user prefers tabs over spaces.",
)
#: An engine command that takes a while to start: sleep, then the real engine (a loaded host, a
#: large index to open). Commas split the setting into argv; the script has none.
SLOW_START_S = 2
SLOW_ENGINE = ",".join(["sh", "-c", f'sleep {SLOW_START_S}; exec "$0" "$@"', *engine_command()])


def extracting(*facts: str) -> list[str]:
    return [f'{{"facts": ["{fact}"]}}' for fact in facts]


def stored(ws: Path, fact: str) -> bool:
    return len(files_containing(ws / "notes", fact)) == 1


class Conversation:
    """One gateway, one owner and token, a fake model: the parts every test here shares."""

    def __init__(self, tmp: Path, **settings: str) -> None:
        self.tmp, self.settings = tmp, settings
        self.gateway = start_gateway(tmp / "data", tmp / "gateway.log", **settings)
        self.gateway.owner(ADA)
        self.token = self.gateway.token(ADA, "Host")
        self.ws = self.gateway.workspace_dir(ADA)

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint.service(self.gateway.mcp_url, self.token)

    def restart(self) -> None:
        """Stop the gateway (its engines with it) and start it again on the same data dir and port."""
        port = self.port
        self.gateway.stop()
        self.start(port)

    @property
    def port(self) -> str:
        return self.gateway.url.rsplit(":", 1)[1]

    def start(self, port: str) -> None:
        self.gateway = start_gateway(self.tmp / "data", self.tmp / "gateway.log", port=port, **self.settings)


@pytest.fixture
def fake() -> Iterator[FakeChat]:
    with running_fake_chat() as chat:
        yield chat


async def wait_until(condition: object, what: str, timeout: float = 60.0) -> None:
    """``wait_for`` off the event loop, so the provider's background saves keep running."""
    assert callable(condition)
    await anyio.to_thread.run_sync(lambda: wait_for(condition, timeout=timeout, what=what))


async def test_a_gateway_restarted_mid_conversation_loses_no_save(tmp_path: Path, fake: FakeChat) -> None:
    talk = Conversation(tmp_path)
    settings = HostSettings(enabled=True, load_timeout=20, save_timeout=120)
    fake.extractions = extracting(*FACTS)
    try:
        async with MemoryProvider(talk.endpoint, settings, extract=openai_chat(fake.base_url, "m")) as memory:
            assert await memory.before_turn("Where is Fjord deployed?") == ""
            memory.after_turn("We ship Fjord to Hetzner on Fridays.", "Noted.")
            await memory.drain()
            assert stored(talk.ws, FACTS[0])

            talk.restart()  # the connection the provider holds now names a session nobody knows
            block = await memory.before_turn("Where is the Fjord app deployed?")
            assert FACTS[0] in block  # the load itself reconnected
            memory.after_turn("My cat is Miso.", "Nice.")
            await memory.drain()
            assert stored(talk.ws, FACTS[1])

            # stopped while a save is under way: it is tried again until the gateway is back
            port = talk.port
            await anyio.to_thread.run_sync(talk.gateway.stop)
            memory.after_turn("Tabs, always.", "Noted.")
            await wait_until(lambda: len(fake.extraction_requests) == 3, "the third turn's extraction")
            await anyio.to_thread.run_sync(talk.start, port)
            with anyio.fail_after(120):
                await memory.drain()
            status = memory.status
    finally:
        talk.gateway.stop()
    assert all(stored(talk.ws, fact) for fact in FACTS)
    assert status == SaveStatus(saved=3, failed=0, lost=0, pending=0, last_failure=None)


class InProcessModel:
    """A host whose small model runs in its own process (llama.cpp bindings, say): the extraction
    answers at once, so the save goes out the moment the turn ends."""

    def __init__(self, *facts: str) -> None:
        self.answers = extracting(*facts)
        self.calls = 0

    async def __call__(self, messages: list[dict[str, str]]) -> str:
        self.calls += 1
        return self.answers.pop(0) if self.answers else '{"facts": []}'


async def test_saves_after_loads_that_timed_out_all_land(tmp_path: Path) -> None:
    # Every engine start takes SLOW_START_S, far over the load bound; the engine stops when idle, so
    # each turn's load finds it cold and gives up mid-call, and the turn's save follows at once.
    talk = Conversation(
        tmp_path, engine_command=SLOW_ENGINE, engine_warm_spare="false", engine_idle_timeout="1"
    )
    settings = HostSettings(enabled=True, load_timeout=0.5, save_timeout=120)
    model = InProcessModel(*FACTS)
    try:
        async with MemoryProvider(talk.endpoint, settings, extract=model) as memory:
            for number, fact in enumerate(FACTS, 1):
                await wait_until(lambda: not talk.gateway.engines(), "the idle engine to stop")
                began = time.monotonic()
                assert await memory.before_turn(f"turn {number}: what do you know?") == ""
                assert time.monotonic() - began < SLOW_START_S  # it gave up: the engine was starting
                memory.after_turn(f"turn {number}", "Noted.")
                with anyio.fail_after(120):
                    await memory.drain()
                assert stored(talk.ws, fact), f"turn {number}'s fact was lost"
            status = memory.status
    finally:
        talk.gateway.stop()
    assert model.calls == len(FACTS)
    assert status == SaveStatus(saved=len(FACTS), failed=0, lost=0, pending=0, last_failure=None)


async def test_a_503_with_retry_after_is_waited_out_within_save_timeout(
    tmp_path: Path, fake: FakeChat
) -> None:
    # Another engine holds the workspace's lock: the gateway cannot start its own and answers 503
    # engine_start_failed with Retry-After: 1 (retry_after=1, its backoff capped well under that,
    # and no crash-loop verdict for the few failed starts this test makes).
    talk = Conversation(
        tmp_path,
        retry_after="1",
        restart_backoff_initial="0.05",
        restart_backoff_max="0.5",
        crash_loop_threshold="50",
    )
    settings = HostSettings(enabled=True, load_timeout=20, save_timeout=60)
    fake.extractions = extracting(FACTS[0])
    refusals = "almanac_unavailable_total"
    try:
        with socket_engine(talk.ws, tmp_path / "squatter.sock", "--embedding-provider", "off") as squatter:
            async with MemoryProvider(
                talk.endpoint, settings, extract=openai_chat(fake.base_url, "m")
            ) as memory:
                began = anyio.current_time()
                memory.after_turn("We ship Fjord to Hetzner on Fridays.", "Noted.")
                # refused twice (the client's discovery, then its handshake): a host that does not
                # wait and try again has lost the save by now
                await wait_until(lambda: talk.gateway.metric(refusals) >= 2, "two 503s")
                refused_at = time.monotonic()
                squatter.terminate()
                await anyio.to_thread.run_sync(squatter.wait, 30)
                await wait_until(lambda: stored(talk.ws, FACTS[0]), "the saved fact", timeout=60)
                landed_at = time.monotonic()
                await memory.drain()
                took = anyio.current_time() - began
                status = memory.status
    finally:
        talk.gateway.stop()
    assert landed_at - refused_at >= 0.9  # Retry-After: 1 was honoured (polling adds < 0.1 s)
    assert took < settings.save_timeout
    assert status == SaveStatus(saved=1, failed=0, lost=0, pending=0, last_failure=None)


async def test_a_save_that_cannot_land_within_save_timeout_is_counted_and_logged(
    tmp_path: Path, fake: FakeChat, caplog: pytest.LogCaptureFixture
) -> None:
    # The same refusal, but Retry-After: 30 is past the save's 20 s bound: no use waiting. (Each
    # refusal takes the gateway a few seconds: it starts an engine that finds the lock taken.)
    talk = Conversation(tmp_path, retry_after="30")
    settings = HostSettings(enabled=True, load_timeout=20, save_timeout=20)
    fake.extractions = extracting(FACTS[0], FACTS[1])
    caplog.set_level(logging.INFO, "almanac.host")
    try:
        with socket_engine(talk.ws, tmp_path / "squatter.sock", "--embedding-provider", "off"):
            async with MemoryProvider(
                talk.endpoint, settings, extract=openai_chat(fake.base_url, "m")
            ) as memory:
                for turn in ("We ship Fjord to Hetzner on Fridays.", "My cat is Miso."):
                    began = anyio.current_time()
                    memory.after_turn(turn, "Noted.")
                    await memory.drain()
                    assert anyio.current_time() - began < settings.save_timeout
                status = memory.status
    finally:
        talk.gateway.stop()
    assert status.saved == 0 and status.failed == 2 and status.lost == 2 and status.pending == 0
    assert status.last_failure is not None and "30 s" in status.last_failure
    failures = [r.getMessage() for r in caplog.records if r.getMessage().startswith("memory not saved")]
    assert len(failures) == 2  # one line per failed save, with the count so far
    assert failures[0].endswith("(failed saves so far: 1)") and failures[1].endswith(
        "(failed saves so far: 2)"
    )
    assert not any(stored(talk.ws, fact) for fact in FACTS)
