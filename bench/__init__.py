"""Benchmarks: each prints ratios measured within one run (no absolute timings asserted)."""
