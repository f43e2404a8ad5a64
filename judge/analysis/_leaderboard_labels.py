"""The leaderboard's judge runs with human labels: each system's prediction-powered TSA and
every pair's difference, from one shared sample, through ``compare``'s machinery and checks
(the sample drawn again from its run, labels paired with runs by the predictions they name,
PPI++ estimates). Kept apart from the clustered figures: these come from the labelled turns,
with the judge's verdicts on all turns as the helper."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .._errors import OptionError
from ..pipeline import Run
from ._compare import run_differences, sampled_run
from ._design import Tuning, check_tuning
from ._estimates import sample_estimates
from ._labels import HumanLabels, pair_by_predictions
from ._runinfo import recorded_predictions_sha256
from ._sample_check import check_sample
from ._sampling import Sample
from .reports import EstimateFigure, LabelledFigure, LabelledPair, LabelledSystem, LabelledTsa

LABELLED_METHOD = ("prediction-powered TSA (PPI++, power tuning as given) from human labels of "
                   "the turns of one shared sample, the judge's verdicts on every turn as the "
                   "helper; differences paired on the sample as in 'dst-judge compare', not "
                   "corrected for multiplicity (a better system is named only when the "
                   "interval of the difference excludes 0)")


def labelled_tsa(runs: Sequence[Run], names: Sequence[str], labels: Sequence[HumanLabels],
                 sample: Sample, *, sample_path: str | Path, confidence: float = 0.95,
                 tuning: Tuning | str = "loo") -> LabelledTsa:
    """Prediction-powered TSA of each judge run and of every pair's difference.

    ``labels``: one file for all runs (the same predictions) or one per run (paired with the
    runs by the predictions each names, as ``compare`` does)."""
    if len(runs) < 1:
        raise OptionError("human labels need judge runs among the systems")
    tuned = check_tuning(str(tuning))
    digests = [recorded_predictions_sha256(run.path) for run in runs]
    described = [f"run {run.path}" for run in runs]
    files = list(labels)
    warning = None
    if len(files) == 1:
        for digest, name in zip(digests, described, strict=True):
            files[0].check_predictions(digest, run=name)
        files = files * len(runs)
    elif len(files) == len(runs):
        files, warning = pair_by_predictions(files, digests, described)
    else:
        raise OptionError(f"--human has {len(files)} files for {len(runs)} judge runs: give "
                          "one for all or one per run")
    drawn = sampled_run(runs, sample, digests)
    checked = check_sample(sample, runs[drawn].rows, predictions_sha256=digests[drawn])
    humans = [f.per_turn() for f in files]
    resolutions = [f.resolve() for f in files]
    systems: list[LabelledSystem] = []
    for run, name, human, resolution in zip(runs, names, humans, resolutions, strict=True):
        found = sample_estimates(sample, [run.rows], [human], confidence=confidence,
                                 tuning=tuned, names=[name], drawn_from=runs[drawn].rows,
                                 resolutions=[resolution])
        tsa = found["estimates"]["tsa"]
        systems.append({"name": name, "tsa": _figure(tsa["ppi"]),
                        "labels_only": _figure(tsa["labels"]),
                        "judge": _figure(tsa["judge"]),
                        "warning": tsa["ppi"].get("warning")})
    pairs: list[LabelledPair] = []
    if len(runs) > 1:
        by_path = {str(run.path): name for run, name in zip(runs, names, strict=True)}
        for pair in run_differences(runs, humans, sample, confidence=confidence,
                                    tuning=tuned, drawn_from=drawn, resolutions=resolutions):
            ppi = pair["estimates"]["tsa"]["ppi"]
            ci = ppi.get("ci")
            a, b = by_path[pair["a"]], by_path[pair["b"]]
            pairs.append({"a": a, "b": b, "metric": "tsa", "difference": ppi.get("value"),
                          "ci": ci, "significant": bool(ci and (ci[0] > 0 or ci[1] < 0)),
                          "verdict": pair["verdict"].replace(pair["a"], a)
                          .replace(pair["b"], b)})
    return {"method": LABELLED_METHOD, "confidence": confidence, "tuning": tuned,
            "sample": str(sample_path), "sample_check": checked,
            "labels_pairing": warning, "systems": systems, "pairs": pairs}


def _figure(found: EstimateFigure) -> LabelledFigure:
    return {"value": found.get("value"), "ci": found.get("ci"),
            "n_labelled": found.get("n_labelled")}
