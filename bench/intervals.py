"""The shipped prediction intervals against the current model, out of sample.

``python -m bench.accuracy --check-intervals`` predicts the rows of the catalogue models outside
the calibration set with the shipped constants (:func:`servesize.calibration.holdout.
outside_models`, no refit) and counts how many measurements fall inside the bands of
``servesize/data/prediction_intervals.json`` at each stated coverage, per engine. It checks the
file after a model change without the refits that ``--write-intervals`` runs; the bands
themselves stay those of the residuals the file was built from.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from servesize.calibration.holdout import COVERAGES, HeldOutRow, band_holds, outside_models
from servesize.core.uncertainty import METRICS, PredictionIntervals

INTERVALS_JSON = (
    Path(__file__).resolve().parent.parent / "servesize" / "data" / ("prediction_intervals.json")
)


def inside_counts(
    rows: list[HeldOutRow], table: PredictionIntervals
) -> dict[str, dict[tuple[str, float], int]]:
    """Per engine, how many rows' measured value lies in the band of their prediction."""
    counts: dict[str, dict[tuple[str, float], int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        for metric in METRICS:
            for c in COVERAGES:
                counts[r.engine][(metric, c)] += int(band_holds(table, r, metric, c))
    return counts


def print_check() -> None:
    """The coverage table (module docstring)."""
    from bench.accuracy import architectures

    table = PredictionIntervals.from_mapping(json.loads(INTERVALS_JSON.read_text()))
    rows = outside_models(architectures())
    counts = inside_counts(rows, table)
    totals: dict[str, int] = defaultdict(int)
    for r in rows:
        totals[r.engine] += 1
    print("\nShipped intervals on out-of-sample rows, current model (% inside at 80 / 95 %)")
    print(f"  {'engine':8s} {'rows':>5s} " + " ".join(f"{m:>13s}" for m in METRICS))
    for engine in sorted(totals):
        n = totals[engine]
        share = {k: 100 * v / n for k, v in counts[engine].items()}
        cells = [f"{share.get((m, 0.8), 0):5.0f} / {share.get((m, 0.95), 0):3.0f}" for m in METRICS]
        print(f"  {engine:8s} {n:5d} " + " ".join(f"{c:>13s}" for c in cells))
