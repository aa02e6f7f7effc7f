"""The comparison's run plan: which cells run, with which flags."""
from experiments.compare import plan


def test_scaling_plan_has_baseline_reference_and_each_strategy_per_n():
    runs = dict(plan(["mlp"], [1, 2], [4096], ["mirrored", "parameter_server"], 1, 1))
    assert list(runs) == ["baseline/mlp/4096/r0", "hardware_reference/mlp/4096/r0",
                          "mirrored-n1/mlp/4096/r0", "parameter_server-n1/mlp/4096/r0",
                          "mirrored-n2/mlp/4096/r0", "parameter_server-n2/mlp/4096/r0"]
    assert "--num_ps=1" in runs["parameter_server-n2/mlp/4096/r0"]


def test_straggler_plan_slows_the_last_worker_of_each_multi_worker_strategy():
    runs = dict(plan(["mlp"], [1], [4096], ["mirrored", "multi_worker_mirrored",
                                            "parameter_server"], 1, 1, ["straggler"], [0, 50], 3))
    assert sorted(runs) == ["straggler-multi_worker_mirrored-n3-d0/mlp/4096/r0",
                            "straggler-multi_worker_mirrored-n3-d50/mlp/4096/r0",
                            "straggler-parameter_server-n3-d0/mlp/4096/r0",
                            "straggler-parameter_server-n3-d50/mlp/4096/r0"]
    slowed = runs["straggler-parameter_server-n3-d50/mlp/4096/r0"]
    assert "--straggler_task=worker:2" in slowed and "--straggler_delay_ms=50" in slowed
    assert "--num_workers=3" in slowed
    assert not any("straggler_task" in f for f in runs[
        "straggler-multi_worker_mirrored-n3-d0/mlp/4096/r0"])
