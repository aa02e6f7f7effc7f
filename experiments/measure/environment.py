"""What ran a record: versions, CPU, devices, threads, host. Recorded so results are comparable."""
import os
import platform
import socket
import sys

import keras
import tensorflow as tf

from experiments.engine import tf_settings
from tf_config.events import RUN_CPUS_ENV


def describe():
    return {
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        # the run's (fewer under --pin_cores or a cgroup); a pinned task's own: process_cpus
        "usable_cpus": int(os.environ.get(RUN_CPUS_ENV) or len(os.sched_getaffinity(0))),
        "process_cpus": len(os.sched_getaffinity(0)),
        "physical_devices": [d.name for d in tf.config.list_physical_devices()],
        "logical_devices": [d.name for d in tf.config.list_logical_devices()],
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "onednn": tf_settings.onednn_enabled(),  # which CPU kernels ran (tf_settings.py)
        "onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),  # what asked for them
    }
