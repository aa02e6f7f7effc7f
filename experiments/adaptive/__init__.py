"""--adapt: one run as a chain of configurations. supervisor (the command's side: launches each
configuration's `experiments.run` from the last one's checkpoint), segment (inside a run: the
chief's check after each epoch, the workers' agreement, the switch request, the record's
account) and decide (the pure decision: drift, the network it implies, the best configuration
and whether a switch pays), profile_here (--strategy=auto's profile measured here) and
on_workers (--strategy=auto on a platform's TF_CONFIG cluster: planned on its own tasks).

May import: experiments.config, results.model (planner, specs, and the profile's builder
workload_profile), results.records (store, cells, step_stamps' straggler thresholds), strategies,
tf_config. Not experiments.engine: the engine calls segment, not the other way round.
"""
