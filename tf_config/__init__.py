"""TF_CONFIG: build cluster specs, read and validate what a platform set, launch local clusters,
and let a platform's tasks meet before TensorFlow starts (rendezvous: --strategy=auto's plan).

- spec.py: cluster specs and TF_CONFIG (parse, validate, this task's role).
- launch.py: `python -m tf_config.launch` and run(): a local cluster from start to stop, its
  restarts (recovery.py), Ctrl-C and SIGTERM, the private network namespace (netns.py);
  attempt.py: one attempt's tasks, supervised; cores.py: a cluster's Placement (threads, CPUs);
  task_process.py and task_output.py: one task's process, its console lines and log file;
  events.py: the markers and environment a launcher and its tasks share; watchdog.py: hangs.
- netshape.py and schedules.py: the emulated network and straggler of a local cluster.
- rendezvous.py: a platform's tasks meeting before TensorFlow starts.

May import: strategies (names and kinds, spec.py), psutil and the standard library. Nothing in
this package imports TensorFlow: the launcher must stay light and start fast.
"""
from tf_config.spec import (TASK_TYPES, TFConfigError, TaskRole, check_strategy_fits, free_ports,
                            local_cluster, parse_tf_config, role_from_env, tf_config_json)
