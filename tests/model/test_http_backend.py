"""Both HTTP backends talk to a real (local, fault-injecting) server alike; aiohttp is the
default outside the tests."""

from __future__ import annotations

import pytest

import judge

from ..fault_server import FaultConfig, FaultServer


@pytest.mark.parametrize("backend", ["httpx", "aiohttp"])
def test_backends_complete_a_run_with_retries(tmp_path, example_data, backend, monkeypatch):
    import judge.model._client as client_module

    monkeypatch.setattr(client_module, "BACKOFF_INITIAL", 0.001)
    schema, dialogues, predictions = example_data
    with FaultServer(FaultConfig(latency=0.005, rates={"http_503": 0.3}, seed=5)) as server:
        config = judge.load_config({"base_url": server.url, "model": "m", "use_cache": False,
                                    "http_backend": backend, "max_retries": 3,
                                    "cache_dir": str(tmp_path)})
        result = judge.evaluate(config, schema, dialogues, predictions)
        stats = server.snapshot(bodies=False)
    assert result.summary["error_turns"] == 0
    assert result.summary["calls"]["sent"] == stats["total"]
    assert result.summary["calls"]["retries"] == stats["by_kind"]["http_503"] > 0
