"""TF_CONFIG: build cluster specs, read and validate what a platform set, launch local clusters,
and let a platform's tasks meet before TensorFlow starts (rendezvous: --strategy=auto's plan).

Nothing in this package imports TensorFlow: the launcher must stay light and start fast.
"""
from tf_config.spec import (TASK_TYPES, TFConfigError, TaskRole, check_strategy_fits, free_ports,
                            local_cluster, parse_tf_config, role_from_env, tf_config_json)
