"""Offline max throughput against TensorRT-LLM's published figures (validation only).

``python -m bench.offline`` (or ``python -m bench.accuracy --offline``) predicts every row of
``servesize/data/validation/trtllm_perf_overview.csv`` (:mod:`servesize.calibration.offline`):
H100 rows with the datasheet roofline and with the measured H100 kernel tables, H200 rows with
the datasheet roofline, all under the fitted engine constants (MoE rows with attention
data-parallel, then again with attention tensor-parallel on the H100 tables and the H200
datasheet: the page's YAML does not settle which ran, :mod:`servesize.calibration.offline`),
prints measured vs predicted per row (with the predicted residency, the mean step and the
step the published figure implies at that residency) and MAPE / median / p90 of the absolute
error and the mean signed error for dense and MoE models and for each MoE model, then the MoE
layer model's errors on ``moe.csv`` (fitted on the Qwen3-30B-A3B shapes, Mixtral-8x7B held out).
"""

from __future__ import annotations

from servesize.calibration import (
    H100_DATA_DIRECTORY,
    OfflinePrediction,
    datasheet_rates,
    load_measured_profile,
    load_moe_tables,
    load_offline_rows,
    moe_kernel_errors,
    predict_offline,
    reference_gpu,
    summarise_offline,
)
from servesize.core.steptime import DEFAULT_MOE_KERNEL


def _implied_step_ms(p: OfflinePrediction) -> float:
    """The mean step the published figure implies at the predicted residency:
    ``step · predicted / measured`` (same sequences resident, same output per step)."""
    measured = p.row.output_throughput_tokens_per_s
    return p.step_time_s * 1e3 * p.predicted_tokens_per_s / measured


def _print_rows(label: str, predictions: list[OfflinePrediction]) -> None:
    print(f"\n[{label}] output tokens/s, all GPUs of the group")
    print(f"  {'model':18s} {'GPUs':>4s} {'ISL/OSL':>11s} {'measured':>9s} {'predicted':>9s} "
          f"{'error':>7s} {'resident':>8s} {'step ms':>8s} {'implied':>8s}")  # fmt: skip
    for p in predictions:
        r = p.row
        lengths = f"{r.input_tokens}/{r.output_tokens}"
        print(
            f"  {r.model:18s} {r.num_gpus:4d} {lengths:>11s} "
            f"{r.output_throughput_tokens_per_s:9.0f} {p.predicted_tokens_per_s:9.0f} "
            f"{p.error_percent:+6.1f}% {p.resident_sequences:8.0f} {p.step_time_s * 1e3:8.1f} "
            f"{_implied_step_ms(p):8.1f}"
        )
    print(f"  {'':18s} {'rows':>4s} {'MAPE %':>8s} {'median':>7s} {'p90':>7s} {'signed':>7s}")
    groups: list[tuple[str, list[OfflinePrediction]]] = [
        (name, [p for p in predictions if p.moe is moe])
        for name, moe in (("dense", False), ("MoE", True))
    ]
    groups += [
        (f"  {model}", [p for p in predictions if p.moe and p.row.model == model])
        for model in sorted({p.row.model for p in predictions if p.moe})
    ]
    for name, chosen in groups:
        s = summarise_offline(chosen)
        print(
            f"  {name:18s} {s.count:4d} {s.mape:8.1f} {s.median:7.1f} {s.p90:7.1f} "
            f"{s.mean_signed:+7.1f}"
        )


def print_moe_kernel() -> None:
    """The MoE layer model's errors on ``moe.csv`` (fitted rows and held-out rows)."""
    tables = load_moe_tables(H100_DATA_DIRECTORY / "moe.csv")
    rates = datasheet_rates(reference_gpu("H100 SXM"))
    print("\nMoE layer model on moe.csv (MAPE / median / p90 %)")
    for label, hidden, dist in (
        ("Qwen3-30B-A3B balanced (fitted)", 2048, True),
        ("Mixtral-8x7B balanced (held out)", 4096, True),
        ("Qwen3-30B-A3B power-law", 2048, False),
        ("Mixtral-8x7B power-law", 4096, False),
    ):
        chosen = [
            t for t in tables if t.hidden_size == hidden and (t.distribution == "balanced") is dist
        ]
        e = moe_kernel_errors(chosen, rates, DEFAULT_MOE_KERNEL)
        print(f"  {label:36s} {e.count:5d} {e.mape:7.1f} {e.median:7.1f} {e.p90:7.1f}")


def print_offline() -> None:
    """Both variants of the offline comparison, then the MoE layer model's errors."""
    from bench.accuracy import architectures

    archs = architectures()
    h100, h200 = reference_gpu("H100 SXM"), reference_gpu("H200 SXM")
    rows = load_offline_rows()
    _print_rows("H100 SXM, datasheet + constants", predict_offline(rows, archs, h100))
    _print_rows(
        "H100 SXM, measured H100 tables + constants",
        predict_offline(rows, archs, h100, measured=load_measured_profile()),
    )
    _print_rows("H200 SXM, datasheet + constants", predict_offline(rows, archs, h200))
    tp_layout = predict_offline(
        rows, archs, h100, measured=load_measured_profile(), moe_layout="tensor_parallel"
    )
    _print_rows(
        "H100 SXM, measured tables + constants, MoE attention TP (the page's YAML is ambiguous)",
        [p for p in tp_layout if p.moe],
    )
    _print_rows(
        "H200 SXM, datasheet + constants, MoE attention TP",
        [p for p in predict_offline(rows, archs, h200, moe_layout="tensor_parallel") if p.moe],
    )
    print_moe_kernel()


def main() -> None:
    print_offline()


if __name__ == "__main__":
    main()
