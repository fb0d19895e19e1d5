"""``tools/mutations.py`` stays runnable as the code moves: every mutation's text occurs
once in its file, and every test it names exists, so each deliberate bug is still applied
and still meets the tests meant to catch it."""
import importlib
import sys

import pytest

from tests.helpers.paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import mutations  # noqa: E402


@pytest.mark.parametrize("mutation", mutations.MUTATIONS, ids=lambda m: m.name)
def test_each_mutation_applies_once_and_names_tests_that_exist(mutation):
    assert (ROOT / mutation.file).read_text().count(mutation.old) == 1, mutation.file
    for test in mutation.tests or mutations.TESTS:
        file, _, name = test.partition("::")
        assert (ROOT / file).is_file(), test
        if name:  # defined in its module, or bound there (official_checks' tests)
            module = importlib.import_module(file.removesuffix(".py").replace("/", "."))
            assert callable(getattr(module, name, None)), test
