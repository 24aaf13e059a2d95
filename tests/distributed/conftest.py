"""Fixtures of the distributed tests."""
import pytest

from es.distributed.server import EmbeddedRedis


@pytest.fixture()
def server():
    """A fresh embedded Redis (valkey) with the master and worker roles, for one test."""
    with EmbeddedRedis() as s:
        yield s
