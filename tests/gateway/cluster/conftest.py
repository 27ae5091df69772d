import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-scoped here: the cluster tests' nodes are started once per module."""
    return "asyncio"
