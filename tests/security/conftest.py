from tests.e2e.conftest import processes  # noqa: F401  (real node processes, killed after each test)
