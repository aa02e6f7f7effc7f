"""The comparison behind `experiments.compare`: one comparison's settings as one typed value
(config: Comparison), the presets registered as such values (presets), the command line laid
over one (options: each value checked), the plan of cells and what counts as already recorded
(plan), running cells and the size calibration (runner), and the
plain-loop cells it runs beside the strategies: the engine floor (floor) and the sharing
calibration (sharing), both commands of their own (`python -m experiments.comparison.floor`).

May import: experiments.config, experiments.engine, experiments.measure, experiments.workload,
results, strategies, tf_config. Not the commands.
"""
