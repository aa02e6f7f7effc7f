"""Benchmarks (not tests): whole-process timings that print figures, and the engine floor."""
