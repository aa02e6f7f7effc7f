"""--strategy=auto on a cluster started the way a platform starts it (every task the same
command, its own TF_CONFIG): the tasks meet, the chief measures the links and plans, each task
trains its part of the choice or says it is left out (experiments/adaptive/on_workers.py)."""
import json
import os
import subprocess
import sys

import pytest

from tests.helpers import NO_PROBES, ROOT, TINY, records_in
from tf_config.spec import free_ports

pytestmark = pytest.mark.integration


def _job(tmp_path, kinds, *flags, codes=None):
    ports = free_ports(len(kinds))
    cluster = {}
    for kind, port in zip(kinds, ports):
        cluster.setdefault(kind, []).append(f"127.0.0.1:{port}")
    procs, seen = [], {}
    for kind in kinds:
        index = seen[kind] = seen.get(kind, -1) + 1
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
               "TF_CONFIG": json.dumps({"cluster": cluster,
                                        "task": {"type": kind, "index": index}})}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "experiments.run", "--strategy=auto", "--model=mlp",
             "--threads=1", f"--results_dir={tmp_path / 'out'}", *TINY, *flags],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=600)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == (codes or [0] * len(procs)), \
        "\n".join(o[-2500:] for o in outputs)
    return outputs


def test_the_chiefs_bad_input_is_every_tasks_one_line_and_nothing_is_written(tmp_path):
    outputs = _job(tmp_path, ["chief", "worker", "ps"], "--plan_profile=/no/such.json",
                   codes=[2, 2, 2])
    for out in outputs:
        errors = [line for line in out.splitlines() if line.startswith("error: ")]
        assert errors == ["error: --plan_profile=/no/such.json: cannot read it as JSON ([Errno "
                          "2] No such file or directory: '/no/such.json')"], out[-2000:]
    assert not (tmp_path / "out").exists()


def test_a_profile_that_pays_for_two_workers_trains_mwms_and_leaves_the_ps_out(tmp_path):
    # a second of compute a step and 40 KB of gradients: two workers all but double it
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"model": "mlp", "batch": 32, "compute_s": 1.0,
                                   "gradient_bytes": {"float32": 40000},
                                   "pull_bytes": 40000, "parameter_bytes": 40000}))
    chief, worker, ps = _job(tmp_path, ["chief", "worker", "ps"], f"--plan_profile={profile}",
                             *NO_PROBES)
    for out in (chief, worker, ps):
        assert "auto: MWMS N=2" in out, out[-2000:]
    assert "ps:0 is not one of the tasks MWMS N=2 uses: nothing to run here" in ps
    assert "rendezvous: 2 task(s) joined; links worker:0" in chief
    (record,) = records_in(tmp_path / "out")
    assert record["strategy"] == "multi_worker_mirrored" and record["num_workers"] == 2
    plan = record["config"]["plan"]
    assert plan["chosen"]["configuration"] == "MWMS N=2"
    assert [link["task"] for link in plan["links"]] == ["worker:0", "ps:0"]
    assert all(link["gbps"] > 0 and link["latency_us"] > 0 for link in plan["links"])
    assert plan["cluster_spec"]["hosts"] == 2 and plan["cluster_spec"]["num_ps"] == 1
    assert plan["cluster_spec"]["inter_host_gbps"] == pytest.approx(
        sorted(link["gbps"] for link in plan["links"])[1] / 2 +
        sorted(link["gbps"] for link in plan["links"])[0] / 2)


def test_the_chief_profiles_its_own_device_when_no_profile_is_given(tmp_path):
    # what the plan chooses follows the speeds measured here; that it is the one both tasks
    # train and the record says, whatever it is, does not
    chief, worker = _job(tmp_path, ["chief", "worker"])
    assert "auto: measuring the workload profile here first" in chief
    assert "measuring" not in worker  # one task profiles; the others wait for its plan
    (record,) = records_in(tmp_path / "out")
    plan = record["config"]["plan"]
    assert plan["profile"].endswith("-here.json") and os.path.exists(plan["profile"])
    assert plan["planned_on"] == "TF_CONFIG's tasks" and len(plan["links"]) == 1
    profile = plan["workload_profile"]  # the record keeps what the plan stood on
    assert profile["model"] == "mlp" and profile["compute_s"] > 0
    chosen = plan["chosen"]["configuration"]
    assert f"auto: {chosen}" in chief and f"auto: {chosen}" in worker
    assert record["strategy"] == plan["chosen"]["settings"]["strategy"]
