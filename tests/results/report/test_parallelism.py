"""The parallelism table (results/report/parallelism.py) from fake records: which records it takes,
the configuration names, throughput against one device, memory per device, and the serial-stage
finding."""
from results.report import parallelism
from results.report.summary import summarize
from tests.results.fake import record


def _pipeline(stages=2, microbatches=4, busy=(0.5, 0.5), measured=0.5):
    return {"num_stages": stages, "microbatches": microbatches,
            "stages": [{"busy_share": b} for b in busy],
            "bubble": {"measured": measured,
                       "formula": (stages - 1) / (microbatches + stages - 1),
                       "formula_unequal_stages": 0.25}}


def _memory(*mb):
    return [{"device": f"/device:CPU:{i}", "bytes": m * 1e6, "kind": "estimate (tensor sizes)"}
            for i, m in enumerate(mb)]


def _records():
    return [
        record("one", run_name="parallel-one_device/cnn/1024/r0", threads=2, epoch_time=1.0,
               global_batch=128, memory_per_device=_memory(30)),
        record("dp", "multi_worker_mirrored", 2, run_name="parallel-mwms-n2/cnn/1024/r0",
               epoch_time=0.8, global_batch=128, memory_per_device=_memory(20),
               communication_fraction=0.2),
        record("mp", "model_parallel", run_name="parallel-model_parallel-s2-m4/cnn/1024/r0",
               epoch_time=2.0, global_batch=128, memory_per_device=_memory(16, 12),
               pipeline=_pipeline(busy=(0.6, 0.45))),
        # A pipelined run outside any comparison lands here too.
        record("mp1", "model_parallel", epoch_time=1.5, global_batch=128,
               memory_per_device=_memory(16, 12), pipeline=_pipeline(microbatches=1)),
        record("base", run_name="baseline/cnn/1024/r0"),
    ]


def test_rows_name_each_configuration_and_compare_with_one_device():
    rows = parallelism.rows(_records())
    assert [r["configuration"] for r in rows] == [
        "one device", "data parallel (MWMS) N=2", "model parallel S=2 M=1",
        "model parallel S=2 M=4"]
    by = {r["configuration"]: r for r in rows}
    assert by["data parallel (MWMS) N=2"]["vs_one_device"] == 1.0 / 0.8
    assert by["model parallel S=2 M=4"]["vs_one_device"] == 0.5
    assert by["model parallel S=2 M=4"]["peak_memory_per_device_mb"] == 16
    assert by["model parallel S=2 M=4"]["devices"] == 2
    assert by["data parallel (MWMS) N=2"]["devices"] == 2
    assert by["model parallel S=2 M=4"]["bubble_formula"] == 0.2
    assert by["model parallel S=2 M=4"]["stage_busy_shares"] == [0.6, 0.45]


def test_parallelism_runs_stay_out_of_the_scaling_summary():
    rows = summarize(_records())
    assert [r["role"] for r in rows] == ["baseline"]


def test_markdown_flags_stages_that_never_overlapped():
    text = parallelism.markdown(parallelism.rows(_records()))
    assert "| model parallel S=2 M=4 |" in text.replace("cnn (synthetic, 1024, 128) | ", "")
    assert "0.50 (0.20; 0.25)" in text
    assert "16.0*" in text
    # M=4 and a bubble of (S-1)/S: the stages never overlapped.
    assert "model parallel S=2 M=4: bubble 0.50 measured, 0.20 by GPipe's formula, 0.25 for " \
           "this split's unequal stage times; the stages did not overlap" in text
    assert "fastest is data parallel (MWMS) N=2" in text
    # A bubble the split's imbalance explains is said so, not called serial.
    explained = [r for r in _records() if r["run_id"] != "mp"] + [record(
        "mp", "model_parallel", run_name="parallel-model_parallel-s2-m4/cnn/1024/r0",
        epoch_time=0.9, global_batch=128, memory_per_device=_memory(16, 12),
        pipeline=_pipeline(busy=(0.6, 0.9), measured=0.27))]
    text = parallelism.markdown(parallelism.rows(explained))
    assert "did not overlap" not in text
    assert "0.25 for this split's unequal stage times: the split's imbalance explains" in text
