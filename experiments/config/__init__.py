"""What a run is asked to do, checked before TensorFlow starts (no TensorFlow import here).

- run_config.py: RunConfig (one run) and LaunchConfig (a local cluster's launcher), each field
  declared once with its default, help, choices and bound; ConfigError.
- validation.py: validate(cfg), the rules; bad input is one line and exit code 2.
- checkpoint_layout.py: how a --checkpoint_dir was written (--zero's shards, the tensor split),
  read without TensorFlow, and the line that refuses a run which cannot resume it.
- flags.py: the absl flags made from those fields; cli.py: how every command parses them and
  treats bad input; network_flags.py: the projected network of the report's scaling model.
- auto.py: --strategy=auto's choice; planned_run.py: a planned configuration as a run's
  settings, its experiments.run flags and experiments.vertex command.

May import: experiments.workload's pure-Python parts (datasets, npz_data, user_code), models and
strategies (names only), results.model (planner, specs: auto, planned_run; scaling_model:
network_flags), results.records.store (is_url: which paths are URLs), tf_config.schedules (the
emulations' EPOCH:VALUE schedules). Nothing imports TensorFlow.
"""
from experiments.config.run_config import ConfigError, LaunchConfig, RunConfig
from experiments.config.validation import check_dataset, check_model, validate
