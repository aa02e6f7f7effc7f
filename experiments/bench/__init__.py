"""Hand-run benchmarks that print figures (`make bench` runs peer): the toolkit's loop against a
model.fit script (peer, peer_keras), MWMS against one process (mwms), restarts under faults
(chaos), the cost model against published multi-node results (validate_published), the
planner's ranking (validate_ranking) and TensorBoard's views in headless Chromium
(tensorboard_shot). Dated results go to docs/benchmarks.md. The product never imports these.

May import: experiments.comparison.runner, experiments.config, experiments.engine.tf_settings,
experiments.workload (peer_keras: the same input as the toolkit), models, results, tf_config.
"""
