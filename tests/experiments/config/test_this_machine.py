"""--strategy=auto and --adapt without --plan_cluster plan for this machine (experiments/config/
auto.py this_machine): its GPUs as one host's devices, or its cores as one-core workers."""
import json
import stat

from experiments.config import auto
from tests.helpers import run_module


def test_without_gpus_the_cores_are_one_core_workers_sharing_the_machine():
    two = auto.this_machine(2)
    assert (two.hosts, two.devices_per_host, two.machine_cores, two.shared_medium) == \
        (2, 1, 2, True)
    big = auto.this_machine(64)  # each worker a TensorFlow process: a few, on all the cores
    assert big.hosts == auto.MAX_CPU_WORKERS and big.machine_cores == 64
    gpus = auto.this_machine(8, 4, 16160.0)
    assert (gpus.hosts, gpus.devices_per_host, gpus.memory_per_device_mb) == (1, 4, 16160.0)
    assert gpus.machine_cores == 0  # devices of their own: no cores shared among them


def test_gpus_are_counted_from_the_driver_and_cuda_visible_devices(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: no GPUs
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert auto.visible_gpus() == (0, 0.0)
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '16160\\n24576\\n'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    assert auto.visible_gpus() == (2, 16160.0)  # the smaller memory: a plan must fit both
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert auto.visible_gpus() == (1, 16160.0)


def test_bad_input_found_after_this_machines_spec_was_written_leaves_nothing(tmp_path):
    """The spec is written into --results_dir before the plan reads the profile; a profile that
    cannot be read is bad input: exit 2 in one line, and the spec and the directory go again."""
    bad = tmp_path / "profile.json"
    bad.write_text(json.dumps({"model": "cnn"}))
    out = tmp_path / "out"
    proc = run_module("experiments.run", "--strategy=auto", f"--plan_profile={bad}",
                      f"--results_dir={out}", timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "auto: no --plan_cluster: planning for this machine" in proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1 and "plan_profile" in proc.stderr
    assert not out.exists()
