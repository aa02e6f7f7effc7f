"""--adapt (experiments/adaptive/): a checkpoint resumed under other strategies with the same
weights and optimizer state, and a scheduled network drop that makes the run switch once."""
import glob
import json
import re
import shutil

import pytest

from tests.helpers import can_shape, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration

# The profile the default comparison measured on 2026-11-25 (docs/default_report then), kept
# fixed here: the decisions below rest on its figures, not on the latest report's.
PROFILE = "tests/data/profile-cnn-14336-b64-k1-float32.json"
# two steps an epoch: the state compared is the saved one, whatever the steps that made it
_SMALL = ["--model=cnn", "--optimizer=adam", "--train_examples=256", "--eval_examples=128",
          "--global_batch_size=128", "--nocomm_probe", "--nocompute_probe", "--notensorboard"]


def test_a_checkpoint_resumes_under_other_strategies_with_the_same_state(tmp_path):
    saved = tmp_path / "mwms"
    proc = run_module("experiments.run", "--strategy=multi_worker_mirrored", "--num_workers=2",
                      *_SMALL, "--epochs=1", f"--checkpoint_dir={saved}",
                      f"--results_dir={tmp_path / 'r'}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    digest = json.loads((saved / "state_digest.json").read_text())["digest"]
    # One process restoring the cluster's checkpoint onto devices of its own: model_parallel's
    # stages (one_device's restore is the same code on one device, resumed in
    # tests/integration/test_faults.py::test_resume_single_device_keeps_every_epoch); and PSS's
    # chief onto its ps (one worker: the chief restores, whatever the workers).
    for name, flags in (("parameter_server", ["--num_workers=1", "--num_ps=1"]),
                        ("model_parallel", ["--num_stages=2"])):
        resumed = tmp_path / name
        shutil.copytree(saved, resumed)
        proc = run_module("experiments.run", f"--strategy={name}", *flags, *_SMALL,
                          "--epochs=2", f"--checkpoint_dir={resumed}",
                          f"--results_dir={tmp_path / name}-r")
        assert proc.returncode == 0, name + proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "resumed from" in proc.stdout and ": 2 step(s) done" in proc.stdout, name
        (record,) = records_in(tmp_path / f"{name}-r")
        # every weight and every optimizer slot (Adam's m and v, its step count) as saved
        assert record["restored_state"] == digest, name
        assert digest["optimizer_variables"] > 2 * 4  # slots of the cnn's 8 variables and more
        assert [e["epoch"] for e in record["epochs"]] == [1, 2]
        assert record["epochs"][0]["resumed"] and record["steps_per_epoch"] == 2


@pytest.mark.skipif(not can_shape(), reason="no private namespace or tc tbf here")
def test_a_scheduled_network_drop_makes_the_run_switch_once(tmp_path):
    cluster = tmp_path / "cluster.json"
    # this machine as two one-core workers on one shaped loopback
    cluster.write_text(json.dumps({"hosts": 2, "devices_per_host": 1, "inter_host_gbps": 10.0,
                                   "intra_host_gbps": 10.0, "shared_medium": True,
                                   "num_ps": 1}))
    # no --plan_profile: measured here first (experiments/adaptive/profile_here.py), on this
    # machine as busy as it is, so the plan's predictions and the run's rates agree on it.
    # 13 epochs after the drop: the switch gains several times what it costs, even where a busy
    # machine makes starting a configuration (the switch's cost) slow.
    proc = run_module("experiments.run", "--strategy=auto", "--adapt",
                      f"--plan_cluster={cluster}", "--model=cnn",
                      "--epochs=16", "--train_examples=2048", "--eval_examples=256",
                      # held fixed: without it the plan's first choice sets it (one device: 64)
                      "--global_batch_size=128",
                      "--emulate_bandwidth_schedule=0:10,2:0.05", "--nocomm_probe",
                      "--nocompute_probe", "--notensorboard", f"--results_dir={tmp_path / 'r'}",
                      timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(re.findall(r"adapt: after epoch \d+, switching", proc.stdout)) == 1
    assert "measuring the workload profile here first" in proc.stdout
    (path,) = glob.glob(str(tmp_path / "r" / "profile-cnn-b64-*-here.json"))
    profile = json.loads(open(path).read())
    assert profile["model"] == "cnn" and profile["batch"] == 64 and profile["compute_s"] > 0
    assert profile["gradient_bytes"]["float32"] > 1e6  # the cnn's ~1.7 MB of gradients
    (record,) = records_in(tmp_path / "r")  # the profiling runs' records are not in it
    adapt = record["adapt"]
    (switch,) = adapt["switches"]
    first, then = adapt["segments"][0]["configuration"], adapt["segments"][1]["configuration"]
    assert len(adapt["segments"]) == 2 and switch["to"] != switch["from"]
    # the drop came after epoch 2; the first steady epoch at the slow rate asked for the switch
    assert switch["after_epoch"] == 3
    assert [e.get("emulated_gbps") for e in record["epochs"][:3]] == [10.0, 10.0, 0.05]
    assert [e["configuration"] for e in record["epochs"]] == [first] * 3 + [then] * 13
    assert [e["epoch"] for e in record["epochs"]] == list(range(1, 17))
    # what the network was inferred to be, from the slowed epoch's rate through the cost model
    assert 0.02 < switch["verdict"]["inferred_gbps"] < 0.2
    # the same updates all along: one global batch, the same steps per epoch
    assert record["global_batch_size"] == adapt["global_batch"] == 128
    assert record["steps_per_epoch"] == 16
    measured = switch["measured"]
    assert measured["cost_s"] > 0 and measured["rate_after"] > 2 * measured["rate_before"]
    assert measured["gain_s"] > measured["cost_s"]  # the switch paid, as predicted
    assert not processes_mentioning(str(tmp_path))


def test_a_scheduled_straggler_is_told_from_the_network_and_left_once(tmp_path):
    # the committed cnn profile, with PSS's per-step overhead raised so that the plan starts in
    # MWMS N=2 (the lockstep configuration a straggler holds back)
    profile = json.loads(open(PROFILE).read())
    profile["overhead_s"] = {"multi_worker_mirrored": 0.0, "parameter_server": 0.02}
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"hosts": 2, "devices_per_host": 1, "inter_host_gbps": 10.0,
                                   "intra_host_gbps": 10.0, "shared_medium": True,
                                   "num_ps": 1}))
    proc = run_module("experiments.run", "--strategy=auto", "--adapt",
                      f"--plan_profile={tmp_path / 'profile.json'}", f"--plan_cluster={cluster}",
                      "--model=cnn", "--epochs=11", "--train_examples=1024", "--eval_examples=256",
                      # 1.5 s a step from epoch 3 on, far above a step's compute however busy
                      # the machine: over the 8 epochs left, leaving it gains several times
                      # what a switch costs, even where a busy machine makes that cost high
                      "--global_batch_size=128", "--straggler_schedule=0:0,2:1500",
                      "--nocomm_probe", "--nocompute_probe", "--notensorboard",
                      f"--results_dir={tmp_path / 'r'}", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(re.findall(r"adapt: after epoch \d+, switching", proc.stdout)) == 1
    (record,) = records_in(tmp_path / "r")
    adapt = record["adapt"]
    (switch,) = adapt["switches"]
    assert adapt["segments"][0]["configuration"] == "MWMS N=2"
    # the straggler came after epoch 2; the first epoch with it asked for the switch
    assert switch["after_epoch"] == 3 and switch["to"]["strategy"] != "multi_worker_mirrored"
    verdict = switch["verdict"]
    # named, and its delay read from what the other worker waited (the sleep less the compute
    # MWMS's input buffer overlaps with it), not as a slower network
    assert verdict["straggler"] == "worker:1" and verdict["inferred_gbps"] is None
    assert 0.75 < verdict["straggler_s"] < 1.65, verdict
    assert [e.get("straggler_ms") for e in record["epochs"][:3]] == [0, 0, 1500]
    # what the run measured: the configuration it went to trains faster beside the straggler
    measured = switch["measured"]
    assert measured["rate_after"] > 1.5 * measured["rate_before"], measured
    assert [e["epoch"] for e in record["epochs"]] == list(range(1, 12))
    assert not processes_mentioning(str(tmp_path))


@pytest.mark.parametrize("args, fragment", [
    (["--strategy=one_device"], "--adapt switches between the plan's configurations"),
    (["--strategy=auto", f"--plan_profile={PROFILE}", "--plan_cluster=missing.json"],
     "--plan_cluster=missing.json"),
    # refused before any profiling run (no --plan_profile: one would be measured)
    (["--strategy=auto", "--plan_cluster={fast}", "--model=mlp", "--straggler_schedule=2:60"],
     "--straggler_schedule=2:60: give EPOCH:MS pairs"),
    # found only once the plan chose (two workers on a 1 Tbit/s network: a cluster, which
    # --noisolate_network cannot shape): the profile measured here for it is taken back
    (["--strategy=auto", "--plan_cluster={fast}", "--model=mlp",
      "--emulate_bandwidth_schedule=0:1", "--noisolate_network"], "--emulate_network=best_effort"),
])
def test_adapt_bad_input_exits_2_and_writes_nothing(tmp_path, args, fragment):
    fast = tmp_path / "fast.json"
    fast.write_text(json.dumps({"hosts": 2, "inter_host_gbps": 1000.0}))
    args = [a.format(fast=fast) for a in args]
    # the last case profiles here first: three short runs, minutes on a busy machine
    proc = run_module("experiments.run", "--adapt", *args, f"--results_dir={tmp_path / 'o'}",
                      timeout=600)
    assert proc.returncode == 2 and fragment in proc.stderr.strip().splitlines()[-1], \
        proc.stderr[-2000:]
    assert not (tmp_path / "o").exists()
