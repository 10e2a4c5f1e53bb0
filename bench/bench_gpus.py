"""Predicted vs published offline throughput on GPUs other than the H100, before and after
scaling the H100 tables (``python -m bench.bench_gpus``; ``--rows`` prints every row).

"datasheet" is the roofline over each GPU's datasheet with default efficiencies; "scaled" the
H100 SXM tables carried to the GPU by physical ratios (docs/modeling.md §2.11, §5.5). The rows
are TensorRT-LLM's perf-overview (servesize/data/validation/trtllm_perf_overview_gpus.csv),
validation only.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from servesize.calibration.gpu_validation import (
    KERNEL_SOURCES,
    GpuOfflinePrediction,
    load_gpu_offline_rows,
    predict_gemm_kernels,
    predict_gpu_offline,
    summarise,
)
from servesize.catalog import ModelCatalog
from servesize.core.hardware import datasheet_spec
from servesize.db.seed import datasheet_entries

CATALOGUE = Path(__file__).resolve().parent.parent / "servesize" / "data" / "models"


def _predictions(csv_path: Path | None) -> dict[str, list[GpuOfflinePrediction]]:
    catalog = ModelCatalog(CATALOGUE)
    archs = {model_id: catalog.architecture(model_id) for model_id in catalog.ids()}
    hardware = {s.id: s for s in (datasheet_spec(e) for e in datasheet_entries())}
    rows = load_gpu_offline_rows() if csv_path is None else load_gpu_offline_rows(csv_path)
    return {
        source: predict_gpu_offline(rows, archs, hardware, source=source)
        for source in KERNEL_SOURCES
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every row")
    parser.add_argument(
        "--csv",
        type=Path,
        default=None,
        help="another table of the same layout (e.g. the H100 rows of ../shared/data/h100)",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None and __name__ == "__main__" else argv)
    by_source = _predictions(args.csv)
    print("\nOffline throughput: datasheet roofline vs scaled H100 tables (TensorRT-LLM)")
    groups: dict[tuple[str, str, str], dict[str, list[GpuOfflinePrediction]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for source, predictions in by_source.items():
        for p in predictions:
            dense = "moe" if p.row.model.startswith(("Qwen3", "Llama 4")) else "dense"
            groups[(p.row.gpu.split(" ")[0], p.row.precision, dense)][source].append(p)
            groups[("all", "", "")][source].append(p)
    print(
        f"{'group':<24} {'rows':>4} "
        + " ".join(f"{s + ' MAPE / signed':>24}" for s in KERNEL_SOURCES)
    )
    for key in sorted(groups, key=lambda k: (k[0] == "all", k)):
        cells = []
        count = 0
        for source in KERNEL_SOURCES:
            count, mape, _, signed = summarise(groups[key][source])
            cells.append(f"{mape:>12.1f}% / {signed:>+7.1f}%")
        label = " ".join(k for k in key if k)
        print(f"{label:<24} {count:>4} " + " ".join(f"{c:>24}" for c in cells))
    print("\nPublished GEMM timings (servesize/data/validation/kernels_gpus.csv)")
    hardware = {s.id: s for s in (datasheet_spec(e) for e in datasheet_entries())}
    for k in predict_gemm_kernels(hardware):
        figures = " ".join(
            f"{source} {t * 1e6:.1f} µs ({100 * (t - k.measured_s) / k.measured_s:+.1f} %)"
            for source, t in k.predicted_s.items()
        )
        shape = "x".join(str(d) for d in k.shape)
        print(f"{k.gpu} {k.dtype} {shape}: measured {k.measured_s * 1e6:.1f} µs; {figures}")
    if args.rows:
        print(f"\n{'model':<16} {'gpu':<6} {'prec':<4} {'tp':>2} {'isl/osl':>11} {'measured':>9} "
              + " ".join(f"{s:>10}" for s in KERNEL_SOURCES))  # fmt: skip
        paired = zip(*(by_source[s] for s in KERNEL_SOURCES), strict=True)
        for pair in paired:
            r = pair[0].row
            print(
                f"{r.model:<16} {r.gpu.split(' ')[0]:<6} {r.precision:<4} "
                f"{r.tensor_parallel_size:>2} {f'{r.input_tokens}/{r.output_tokens}':>11} "
                f"{r.output_throughput_tokens_per_s:>9.0f} "
                + " ".join(f"{p.predicted_tokens_per_s:>10.0f}" for p in pair)
            )


if __name__ == "__main__":
    main()
