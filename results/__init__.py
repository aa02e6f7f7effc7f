"""Run records (one JSON file per run) and the figures derived from them: records, cells, metrics
and summary (reading and grouping runs); report, tables, plots, findings, hparams (the report);
the one cost model (cost_model) with its inputs (specs: the workload profile and cluster spec),
the profile fitted from records (workload_profile), the latency-bandwidth fit of the sweeps
(latency_bandwidth), and what predicts through it: projections, scaling_model, network,
recommendation, planner and plan_report, reducers, parallelism, adaptive; validation (the
scaling model's errors on a comparison's own runs); timeline and straggler (the in-step
stamps); zoo; host_check (the host checks around a comparison, and their section).

May import: strategies (the registry's Kind), models (schedules), the standard library,
matplotlib, and TensorFlow / TensorBoard inside the functions that write summaries. Not
experiments or tf_config: the commands call results, not the other way round.
"""
