"""Tests of results/records."""
