"""``judge._names`` holds the choices the CLI's parser offers without loading the stages; where
a stage derives the same list from its own table, the two must agree (a format, profile or
local model added to a stage's table and not to ``judge._names`` would be missing from the
command line's choices)."""

from __future__ import annotations

from judge import _names
from judge.data import FORMAT_NAMES, FORMATS
from judge.metrics import PROFILE_NAMES
from judge.metrics._profiles import PROFILES
from judge.model.local import DEFAULT_MODEL, MODELS


def test_format_names_follow_the_formats_table() -> None:
    assert tuple(f.name for f in FORMATS) == _names.FORMAT_NAMES == FORMAT_NAMES


def test_profile_names_follow_the_profiles_table() -> None:
    assert tuple(PROFILES) == _names.PROFILE_NAMES == PROFILE_NAMES


def test_local_models_follow_the_registry() -> None:
    assert {name: m.description for name, m in MODELS.items()} == _names.LOCAL_MODELS
    assert DEFAULT_MODEL == _names.DEFAULT_LOCAL_MODEL in MODELS
