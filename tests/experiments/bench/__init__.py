"""Tests of experiments/bench: the arithmetic of the benchmarks (not their runs)."""
