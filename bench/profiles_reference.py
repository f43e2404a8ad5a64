"""Scoring profiles against the reference implementations that install from PyPI.

* ``convlab``: ConvLab-3's own ``evaluate_unified_datasets.evaluate`` (from the ``convlab``
  3.0.1 sdist on PyPI; the module needs only the standard library, so it is loaded from the
  unpacked sdist without installing ConvLab's heavy dependencies) on the shared systems,
  converted to ConvLab-3 prediction samples by ``dst-judge``'s own writer.
* ``mwzeval`` and ``sgd``: their scripts are not on PyPI (mwzeval also downloads MultiWOZ 2.2
  at first use), but the fuzzy matcher they call is: ``fuzzywuzzy``. Every distinct
  (gold, predicted) value pair of the shared data is scored by fuzzywuzzy and by the
  profiles' rapidfuzz calls, and the decisions compared.

Run: ``python bench/profiles_reference.py [--data ../shared/data]``; it downloads the sdist
with ``pip download`` into a cache folder once. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge.data import Context, get_format, load_dialogues, load_predictions, load_schema
from judge.metrics import score_profile

CACHE = Path(tempfile.gettempdir()) / "dst-judge-reference"


def convlab_evaluate():
    CACHE.mkdir(exist_ok=True)
    sdists = list(CACHE.glob("convlab-3.0.1.tar.gz"))
    if not sdists:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                        ":all:", "convlab==3.0.1", "-d", str(CACHE)], check=True,
                       capture_output=True)
        sdists = list(CACHE.glob("convlab-3.0.1.tar.gz"))
    member = "convlab-3.0.1/convlab/dst/evaluate_unified_datasets.py"
    target = CACHE / "evaluate_unified_datasets.py"
    if not target.exists():
        with tarfile.open(sdists[0]) as archive:
            target.write_bytes(archive.extractfile(member).read())
    spec = importlib.util.spec_from_file_location("convlab_eval", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.evaluate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared"
                                              / "data"))
    args = parser.parse_args()
    base = Path(args.data) / "multiwoz"
    schema = load_schema(base / "schema.json")
    dialogues = load_dialogues(base / "dialogues.jsonl.gz", schema=schema)
    evaluate = convlab_evaluate()
    writer = get_format("convlab-predictions").writers["predictions"]
    pairs: set[tuple[str, str, str]] = set()
    print("system  gold  ConvLab-3 accuracy / slot F1   convlab profile JGA / slot F1")
    for system in ("original", "da", "da-p"):
        predictions = load_predictions(base / "predictions" / f"{system}.jsonl.gz", dialogues,
                                       schema)
        records = [predictions.for_dialogue(d).to_record() for d in dialogues.dialogues]
        for version in dialogues.versions:
            key = "gold_state_" + version.replace(".", "")
            gold = [d.to_record() for d in dialogues.dialogues]
            for record in gold:
                for turn in record["turns"]:
                    turn["gold_state"] = turn[key]
                    for other in [k for k in turn if k.startswith("gold_state_")]:
                        del turn[other]
            samples = writer(records, Context(schema=schema), gold=gold)
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
                json.dump(samples, handle)
            reference = evaluate(handle.name)
            ours = score_profile(dialogues, predictions, schema, "convlab", gold=version)
            print(f"{system:7} {version}   {100 * reference['accuracy']:6.2f} / "
                  f"{100 * reference['slot_f1']:6.2f}              "
                  f"{ours['figures']['jga']:6.2f} / {ours['figures']['slot_f1']:6.2f}")
            for d in dialogues.dialogues:
                for turn, p_turn in zip(d.turns, predictions.for_dialogue(d).turns,
                                        strict=True):
                    for slot, value in turn.gold_states[version].items():
                        if p_turn.pred_state and slot in p_turn.pred_state:
                            pairs.add((slot, value, p_turn.pred_state[slot]))
    try:
        from fuzzywuzzy import fuzz as reference_fuzz
    except ImportError:
        print("fuzzywuzzy is not installed (pip install fuzzywuzzy): fuzzy check skipped")
        return
    from rapidfuzz import fuzz, utils

    partial = sort = 0
    for _, gold_value, pred_value in pairs:
        for option in gold_value.split("|"):
            if (reference_fuzz.partial_ratio(pred_value, option) > 95) != (
                    fuzz.partial_ratio(pred_value, option) > 95):
                partial += 1
            if abs(reference_fuzz.token_sort_ratio(option, pred_value) / 100 - fuzz.
                   token_sort_ratio(option, pred_value, processor=utils.default_process) / 100
                   ) > 0.01:
                sort += 1
    print(f"{len(pairs)} distinct (slot, gold, predicted) pairs: partial_ratio > 95 decisions "
          f"differ from fuzzywuzzy on {partial}; token_sort_ratio differs by more than 0.01 "
          f"on {sort}")


if __name__ == "__main__":
    main()
