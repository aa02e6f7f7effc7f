"""The one cost model and what predicts through it: specs (profile, cluster spec), cost_model,
workload_profile (fitted from records), scaling_model, recommendation and planner (every
configuration on a cluster, ranked). May import: results.records, strategies, models
(schedules), the standard library. Not results.report or experiments.
"""
