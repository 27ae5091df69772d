"""The embedding package's errors: one tree, each class with a stable ``code``.

::

    EmbedError                       code="embed_error"
    ├── ProviderNotAvailable         code="embed_not_available"   software missing or not answering
    │   ├── ProviderTimeout          code="embed_timeout"         one operation took over the limit
    │   └── ModelChecksumMismatch    code="embed_model_checksum"  the model file is not the pinned one
    ├── ProviderNotSetUp             code="embed_not_set_up"      installed, a setup step is missing
    ├── EmbedRequestError            code="embed_request_failed"  the provider refused or garbled a call
    ├── UnknownProvider              code="embed_unknown_provider"
    └── CacheError                   code="embed_cache"           the embedding cache is unusable

``state`` is the provider state (SPEC §8) a probe reports when it meets the error. Every message
says what went wrong and how to fix it. The tree is self-contained so that ``EmbedError`` can be
re-parented under the engine's root error without touching the subclasses.
"""

from __future__ import annotations

from typing import ClassVar, Literal

ProviderState = Literal["ready", "not_set_up", "not_available"]


class EmbedError(Exception):
    code: ClassVar[str] = "embed_error"
    state: ClassVar[ProviderState] = "not_available"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ProviderNotAvailable(EmbedError):
    code = "embed_not_available"


class ProviderTimeout(ProviderNotAvailable):
    code = "embed_timeout"


class ModelChecksumMismatch(ProviderNotAvailable):
    code = "embed_model_checksum"


class ProviderNotSetUp(EmbedError):
    code = "embed_not_set_up"
    state = "not_set_up"


class EmbedRequestError(EmbedError):
    code = "embed_request_failed"


class UnknownProvider(EmbedError):
    code = "embed_unknown_provider"


class CacheError(EmbedError):
    code = "embed_cache"


#: Every class of the tree by its code (the service sends codes; :mod:`engine.embed.service` maps back).
BY_CODE: dict[str, type[EmbedError]] = {
    cls.code: cls
    for cls in (
        EmbedError,
        ProviderNotAvailable,
        ProviderTimeout,
        ModelChecksumMismatch,
        ProviderNotSetUp,
        EmbedRequestError,
        UnknownProvider,
        CacheError,
    )
}
