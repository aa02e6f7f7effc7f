"""Tests of results/report."""
