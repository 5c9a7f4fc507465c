import pytest

from tests.e2e.procs import Processes


@pytest.fixture
def processes():
    procs = Processes()
    try:
        yield procs
    finally:
        procs.kill_all()
