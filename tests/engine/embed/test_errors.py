"""The package's error tree."""

from __future__ import annotations

from engine.embed.errors import BY_CODE, EmbedError, ProviderNotSetUp, ProviderTimeout


def test_every_error_has_a_code_and_a_state() -> None:
    assert all(cls.code == code for code, cls in BY_CODE.items())
    assert all(issubclass(cls, EmbedError) for cls in BY_CODE.values())
    assert ProviderNotSetUp("x").state == "not_set_up" and ProviderTimeout("x").state == "not_available"
    assert ProviderTimeout("late").message == "late"


def test_codes_are_unique_and_stable() -> None:
    assert len(BY_CODE) == len({cls.code for cls in BY_CODE.values()})
    assert EmbedError.code == "embed_error" and ProviderNotSetUp.code == "embed_not_set_up"
