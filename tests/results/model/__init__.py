"""Tests of results/model."""
