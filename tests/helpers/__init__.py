"""What the tests share that is not a fixture: plain functions and constants,
imported from their module (``from tests.helpers.commands import run_cli``).
Fixtures are in tests/conftest.py; no test module imports another, nor conftest
(tests/test_structure.py checks)."""
