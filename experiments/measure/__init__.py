"""What a run measures besides its epochs' time: the communication probe (comm_probe), CPU
seconds by task (cpu_usage), memory per device (memory), FLOPs and a matmul's rate (flops), the
tensor-parallel sums (tensor_probe), TF profiler traces (profiling), and the software and
kernels that ran (environment).

May import: models, results.records.metrics, results.model.specs (optimizer slots),
tf_config.events, experiments.engine.tf_settings.
Not the rest of experiments.
"""
