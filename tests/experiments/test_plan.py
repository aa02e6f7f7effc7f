"""`python -m experiments.plan`: a hand-written profile and cluster spec in, plan.md, plan.csv,
plan.png and the best's commands out; bad input is one line, exit 2 and nothing written."""
import csv
import json
import os

import pytest
import yaml

from tests.helpers import run_module

PROFILE = "--profile=docs/examples/profile_resnet50_v100.json"
CLUSTER = "--cluster=docs/examples/cluster_8x8_v100_25g.json"


def test_plan_from_a_profile_and_a_cluster_spec(tmp_path):
    proc = run_module("experiments.plan", PROFILE, CLUSTER, f"--out_dir={tmp_path}",
                      "--device_memory_mb=5250", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(os.listdir(tmp_path)) == ["plan.csv", "plan.md", "plan.png"]
    assert os.path.getsize(tmp_path / "plan.png") > 10_000
    with open(tmp_path / "plan.csv") as f:
        rows = list(csv.DictReader(f))
    kept = [r for r in rows if r["fits_memory"] == "True"]
    dropped = [r for r in rows if r["fits_memory"] == "False"]
    # the cap drops what holds the optimizer state on every device (one device, MWMS), and
    # says why; PSS keeps it on the parameter servers
    assert dropped and all("over the 5250 MB cap" in r["dropped"] for r in dropped)
    assert {r["strategy"] for r in dropped} == {"one_device", "multi_worker_mirrored",
                                                "mirrored"}
    # PSS (optimizer state on the ps) and pipelines (1/S of it per device) fit; ZeRO-1 is not
    # offered on hosts of 8 devices (its worker holds one replica)
    assert {r["strategy"] for r in kept} == {"parameter_server", "model_parallel", "hybrid"}
    assert all(r["zero"] == "0" for r in rows)
    rates = [float(r["examples_per_sec"]) for r in kept]
    assert rates == sorted(rates, reverse=True)
    text = (tmp_path / "plan.md").read_text()
    assert "## Best: " in text and "plan: best of" in proc.stdout
    # resnet50 is not a model of this toolkit: the commands name the user's own
    assert "--model=MODULE:FUNCTION" in text and "not a model of this toolkit" in text
    # the printed Vertex command is one experiments.vertex accepts (a dry run)
    vertex = next(line for line in text.splitlines()
                  if line.startswith("python -m experiments.vertex "))
    args = vertex.split()[3:]
    args = [a.replace("MODULE:FUNCTION", "examples.two_branch:build_model") for a in args]
    dry = run_module("experiments.vertex", *args, timeout=120)
    assert dry.returncode == 0, dry.stderr[-2000:]


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "plan"
    for args, message in (
            ([PROFILE, "--cluster=/nonexistent.json"], "--cluster=/nonexistent.json: cannot read"),
            ([PROFILE, CLUSTER, "--hosts=2"], "already says the target: drop --hosts"),
            (["--profile=README.md", CLUSTER], "--profile=README.md: cannot read it as JSON")):
        proc = run_module("experiments.plan", *args, f"--out_dir={out}", timeout=120)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], proc.stderr
        assert not out.exists()


def test_vertex_auto_prints_the_chosen_job(tmp_path):
    auto = [PROFILE.replace("--profile", "--plan_profile"),
            CLUSTER.replace("--cluster", "--plan_cluster"), "--strategy=auto"]
    proc = run_module("experiments.vertex", *auto, "--accelerator_type=NVIDIA_TESLA_V100",
                      "--accelerator_count=8", "--", "--model=cnn", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    job = json.loads(proc.stdout)
    pools = job["worker_pool_specs"]
    assert sum(p.get("replica_count", 0) for p in pools if p) == 8  # one MWMS worker per host
    args = pools[0]["container_spec"]["args"]
    assert "--strategy=multi_worker_mirrored" in args and "--batch_size_per_replica=64" in args
    said = proc.stderr.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("auto: MWMS N=64 (8x8)")
    assert "this job trains cnn" in said[0]  # the profile is resnet50's
    # what the plan chooses cannot be given after --; the accelerators it needs must be given
    for extra, message in ((["--accelerator_type=NVIDIA_TESLA_V100", "--accelerator_count=8",
                             "--", "--accumulation_steps=2"], "with --strategy=auto the plan"),
                           ([], "give --accelerator_type=... --accelerator_count=8")):
        bad = run_module("experiments.vertex", *auto, *extra, timeout=120)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
        assert message in bad.stderr
    # a cluster spec plans here, with a profile; without one the job plans on its own tasks
    bad = run_module("experiments.vertex", *auto[1:], "--accelerator_type=NVIDIA_TESLA_V100",
                     "--accelerator_count=8", "--", "--model=cnn", timeout=120)
    assert bad.returncode == 2 and "plans here, with --plan_profile" in bad.stderr, bad.stderr


@pytest.mark.parametrize("form", ["vertex", "tfjob"])
def test_vertex_auto_without_a_profile_lets_the_job_plan_on_its_own_tasks(form):
    proc = run_module("experiments.vertex", "--strategy=auto", "--num_workers=3", "--num_ps=2",
                      "--accelerator_type=NVIDIA_TESLA_T4", "--accelerator_count=1",
                      f"--format={form}", "--allow_placeholder_image",
                      "--base_output_dir=gs://b/run", "--", "--model=cnn", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = proc.stderr.strip().splitlines()
    assert len(said) == 1 and "the job plans on its own tasks (a chief, 3 worker(s), 2 ps)" in \
        said[0]
    if form == "vertex":
        pools = json.loads(proc.stdout)["worker_pool_specs"]
        counts = [p["replica_count"] for p in pools]
        gpus = [p["machine_spec"].get("accelerator_count", 0) for p in pools]
        commands = [p["container_spec"]["args"] for p in pools]
    else:
        specs = yaml.safe_load(proc.stdout)["spec"]["tfReplicaSpecs"]
        pools = [specs[r] for r in ("Chief", "Worker", "PS")]
        counts = [p["replicas"] for p in pools]
        containers = [p["template"]["spec"]["containers"][0] for p in pools]
        gpus = [int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
                for c in containers]
        commands = [c["args"] for c in containers]
    assert counts == [1, 3, 2]
    assert gpus == [1, 1, 0]  # the chief may train (one device, or an MWMS worker); ps never
    for args in commands:  # every task plans: the same command, no counts of its own
        assert args[0] == "--strategy=auto" and "--model=cnn" in args
        assert not any(a.startswith(("--num_workers", "--num_ps")) for a in args)


def test_a_plan_for_this_machine_prints_its_command_pinned_as_a_comparison_would_run_it(
        tmp_path):
    """A cluster spec with machine_cores (the whole cluster on one machine of 2 cores): the
    printed command pins its workers where a comparison pins that cluster on 2 cores (MWMS N=2
    of one thread each: tf_config.cores.placement, counted on the spec's cores, not the
    planning machine's); a spec without machine_cores prints no pinning."""
    here = "--cluster=docs/examples/cluster_this_machine_2_workers_10g.json"
    profile = "--profile=docs/default_report/profile-cnn-11264-b64-k1-float32.json"
    proc = run_module("experiments.plan", profile, here, f"--out_dir={tmp_path / 'here'}",
                      timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    command = next(line for line in proc.stdout.splitlines()
                   if line.strip().startswith("python -m experiments.run "))
    assert "--strategy=multi_worker_mirrored --num_workers=2 --pin_workers" in command
    assert command.strip() in (tmp_path / "here" / "plan.md").read_text()
    proc = run_module("experiments.plan", profile, "--hosts=2", "--network_gbps=100",
                      f"--out_dir={tmp_path / 'hosts'}", timeout=120)
    assert proc.returncode == 0 and "pin_workers" not in proc.stdout
