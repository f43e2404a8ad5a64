"""Fixtures of the method tests."""

from __future__ import annotations

import pytest

from judge.method import RuleSet, default_rules


@pytest.fixture
def rules(mini_schema) -> RuleSet:
    """The default rules over the small test schema (tests/fixtures/schema_small.json)."""
    return default_rules(mini_schema)
