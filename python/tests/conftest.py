"""The package's tests: the plugin under test is the package's own."""

import os

import pytest

pytest_plugins = ["dsv4ci.plugin", "pytester"]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def golden():
    """A path under fixtures/data/golden/."""
    return lambda *p: os.path.join(REPO, "fixtures", "data", "golden", *p)


@pytest.fixture(scope="session")
def tool():
    """The dsv4-replay these tests drive; not finding it fails them (a test that cannot see fails)."""
    from dsv4ci import replay

    return replay.find_tool()
