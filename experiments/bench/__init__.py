"""Hand-run benchmarks that print figures (`make bench` runs peer): the toolkit's loop against a
model.fit script (peer, peer_keras), MWMS against one process (mwms), restarts under faults
(chaos), and the cost model's validations: on this machine's comparison records
(validate_local) and against published multi-node results (validate_published), the planner's
ranking (validate_ranking), TensorBoard's views in headless Chromium (tensorboard_shot), and
whether the host gives the machine's cores to busy processes at once (host_check).
Dated results go to docs/benchmarks.md. The product never imports these.

May import: experiments.comparison.runner, experiments.config, experiments.engine.tf_settings,
experiments.measure (host_check: the check itself) and experiments.workload (peer_keras: the
same input as the toolkit), models, results, tf_config.
"""
