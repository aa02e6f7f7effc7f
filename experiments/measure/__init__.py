"""What a run measures besides its epochs' time: the communication probe (comm_probe), CPU
seconds by task (cpu_usage), memory per device (memory), TF profiler traces (profiling), and
the software and kernels that ran (environment); and, beside the runs, whether the host gives
the machine's cores to busy processes at once (host_cores).

May import: models, results.metrics, results.specs (optimizer slots),
results.latency_bandwidth (the sweep's sizes), results.host_check (its threshold),
tf_config.events, tf_config.task_process (die_with_parent), experiments.engine.tf_settings.
Not the rest of experiments.
"""
