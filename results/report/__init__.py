"""A comparison's outputs from its records: build (summary.csv, report.md), a module per section
(summary, findings, timeline, straggler, network, reducers, parallelism, adaptive, zoo,
projections, hparams), their helpers (tables, plots), the plan's outputs (plan). May import:
results.records, results.model, strategies, matplotlib, TensorBoard in hparams. Not experiments.
"""
