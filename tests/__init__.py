"""The suite (python -m pytest). Fixtures: conftest.py; shared helpers: helpers/."""
