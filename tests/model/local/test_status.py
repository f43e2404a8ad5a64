"""Status and the judge options of ``evaluate --local`` when no server runs."""

from __future__ import annotations

import pytest

from judge._errors import LocalServerError
from judge.cli._local import local_config_values


def test_local_config_values_without_server(tmp_path):
    with pytest.raises(LocalServerError, match="dst-judge local serve"):
        local_config_values(tmp_path)
