"""The PPI simulation on the shared MultiWOZ stand-ins, small: the stand-in judge agrees with
the stand-in person on about 89-90 % of turns, and a few hundred simple random samples give
intervals that cover and are narrower than labels alone, and no design gives a zero-width
interval. (The full figures, 2,000 samples per setting, come from bench/ppi_coverage.py.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ..conftest import shared_path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "ppi_coverage.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("ppi_coverage", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def population(bench):
    data = shared_path("multiwoz", "dialogues.jsonl.gz").parent
    return bench.load_population(data)


def test_stand_ins_agree_like_a_good_judge(population):
    for system in ("original", "da", "da-p"):
        judge, human = population[system]["judge"], population[system]["human"]
        assert judge.size == human.size == 7368
        assert 0.88 <= float(np.mean(judge == human)) <= 0.91


def test_a_small_simulation_covers_and_gains(bench, population):
    results = bench.simulate(population, samples=400, seed=5, sizes=(100,), flips=(0.0,),
                             designs=("random",), small=())
    single = [e for e in results["systems"] if e["design"] == "random"]
    assert len(single) == 3
    for entry in single:
        for name in ("labels", "ppi"):
            assert 0.9 <= entry[name]["coverage"] <= 0.99, entry
        assert entry["width_ratio"] < 0.85, entry
    for entry in results["differences"]:
        assert 0.9 <= entry["ppi"]["coverage"] <= 0.99, entry


def test_whole_dialogue_samples_never_give_a_zero_width_interval(bench, population):
    """Five dialogues used to give intervals of width 0 (JGA ppi 43.6 [43.6, 43.6]) whenever
    judge and person agreed on each drawn dialogue's total."""
    results = bench.simulate_dialogues(population, samples=200, seed=3, sizes=(5,))
    assert {e["metric"] for e in results} == {"tsa", "jga", "success", "tsa difference"}
    for entry in results:
        for name in ("labels", "ppi"):
            assert entry[name]["zero_width"] == 0, entry
            assert entry[name]["median_width"] > 0.05, entry
