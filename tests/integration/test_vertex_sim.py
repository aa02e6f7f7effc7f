"""A simulated Vertex AI MWMS job: two processes started the way Vertex starts them (TF_CONFIG with
chief + worker pools, CLUSTER_SPEC, AIP_* dirs) write their outputs where Vertex expects them."""
import json
import os
import subprocess
import sys

import pytest

from tests.helpers import NO_PROBES, ROOT, TINY, records_in
from tf_config.spec import free_ports

pytestmark = pytest.mark.integration


def test_vertex_style_mwms_job_writes_to_aip_dirs(tmp_path):
    ports = free_ports(2)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    model_dir, tb_dir, ckpt_dir = tmp_path / "model", tmp_path / "logs", tmp_path / "ckpt"
    procs = []
    for kind in ("chief", "worker"):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
               "TF_CONFIG": json.dumps({"cluster": cluster,
                                        "task": {"type": kind, "index": 0, "trial": ""},
                                        "environment": "cloud", "job": {}}),
               "CLUSTER_SPEC": json.dumps({"cluster": {"workerpool0": cluster["chief"],
                                                       "workerpool1": cluster["worker"]}}),
               "AIP_MODEL_DIR": str(model_dir), "AIP_TENSORBOARD_LOG_DIR": str(tb_dir),
               "AIP_CHECKPOINT_DIR": str(ckpt_dir)}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "experiments.run", "--strategy=multi_worker_mirrored",
             "--model=mlp", "--threads=1", *TINY, *NO_PROBES], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    (record,) = records_in(model_dir)
    assert record["num_workers"] == 2 and record["num_replicas_in_sync"] == 2
    assert record["cluster"]["this_task"] == "chief:0"
    assert (ckpt_dir / "checkpoint").exists() and (ckpt_dir / "epochs.json").exists()
    assert os.listdir(tb_dir) and not os.path.exists(os.path.join(ROOT, "runs", "tensorboard",
                                                                  record["run_id"]))
