"""Hand-run benchmarks that print figures (`make bench` runs peer): the toolkit's loop against a
model.fit script (peer, peer_keras), MWMS against one process (mwms), restarts under faults
(chaos). Dated results go to docs/benchmarks.md. The product never imports these.

May import: experiments.comparison.runner, experiments.config, models, results, tf_config.
"""
