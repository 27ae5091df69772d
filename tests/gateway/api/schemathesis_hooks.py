"""Loaded by the schemathesis run of :mod:`tests.gateway.api.test_contract` (``SCHEMATHESIS_HOOKS``)."""

import schemathesis

# An import's body is a zip: generated as bytes, like any binary body (the engine refuses what is no zip).
schemathesis.serializer.alias("application/zip", "application/octet-stream")
