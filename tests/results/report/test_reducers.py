"""The reducers experiment's table, crossover and plot (results/report/reducers.py) from fake
records: a reducer slower than plain on the real loopback pays off below the bandwidth where its
smaller payload's time on the shaper makes up for that."""
import matplotlib.image as mpimg
import pytest

from results.report import reducers, summary
from tests.results.fake import record

MB = 1_000_000


def _run(form, gbps, epoch_time, acc=0.9, payload=None, how="gather"):
    """MWMS N=2 of 1024 examples (8 steps of 2 x 64) on a 4 MB dense gradient."""
    name = f"reducers-{form.replace(':', '')}-n2-b{gbps:g}/cnn/1024/r0"
    rec = record(f"{form}{gbps}", "multi_worker_mirrored", 2, epoch_time, run_name=name, acc=acc,
                 config={"compression": form}, probe=0.001,
                 network={"emulated_gbps": gbps} if gbps else None)
    rec["communication"].update(gradient_bytes=4 * MB, dense_gradient_bytes=4 * MB)
    rec["compression"] = None if form == "none" else {
        "method": form.split(":")[0], "payload_bytes": payload, "exchange": how, "compress_s": 0.002,
        "state_bytes_per_replica": 4 * MB, "plain_bytes_per_step": 4 * MB}
    return rec


def test_a_reducer_pays_off_below_its_crossover():
    # plain: 8 steps of 0.1 s on loopback; int8 0.12 s (its compression), 1 MB payload
    records = [_run("none", 0, 0.8), _run("int8", 0, 0.96, acc=0.88, payload=MB)]
    fitted = reducers.fits(records)
    plain, int8 = (fitted[(reducers.setting_of(records[0]), f, 2)] for f in ("none", "int8"))
    assert plain.step_s == pytest.approx(0.1) and int8.step_s == pytest.approx(0.12)
    # shared shaper: plain 2(N-1)G = 8 MB a step, int8 N(N-1)C = 2 MB: 48 ms vs 16 ms at 1 Gbit/s
    assert plain.wire_s(1.0) == pytest.approx(0.064) and int8.wire_s(1.0) == pytest.approx(0.016)
    b, side = reducers.crossover(plain, int8)
    assert (b, side) == (pytest.approx(0.048 / 0.02), "below")  # the 20 ms it costs, made up
    assert plain.rate(b) == pytest.approx(int8.rate(b))
    assert reducers.pays_off((b, side), 1.0) and not reducers.pays_off((b, side), 5.0)
    # the other way round: faster on loopback, more bytes: pays off above the same bandwidth
    assert reducers.crossover(int8, plain) == (pytest.approx(2.4), "above")
    faster = reducers.Fit("x", 2, 64, 0.09, MB, "gather", 0)
    assert reducers.crossover(plain, faster) == (None, "always")
    assert reducers.crossover(faster, plain) == (None, "never")


def test_the_table_checks_the_shaped_runs_and_stays_out_of_the_summary(tmp_path):
    plain0, int80 = _run("none", 0, 0.8), _run("int8", 0, 0.96, acc=0.88, payload=MB)
    # at 1 Gbit/s: plain predicted 0.164 s a step, int8 0.136 s; measured within 5% of those
    shaped = [_run("none", 1, 8 * 0.164 * 1.05), _run("int8", 1, 8 * 0.136 * 0.95, acc=0.87,
                                                       payload=MB),
              _run("none", 5, 8 * 0.1128), _run("int8", 5, 8 * 0.1232, payload=MB)]
    records = [plain0, int80, *shaped]
    table = reducers.rows(records)
    at1 = next(r for r in table if r["compression"] == "int8" and r["bandwidth_gbps"] == 1)
    assert at1["predicted_examples_per_sec"] == pytest.approx(128 / 0.136)
    assert at1["error"] == pytest.approx(0.95 - 1)  # it ran 5% faster than predicted
    assert at1["vs_plain"] == pytest.approx(0.164 * 1.05 / (0.136 * 0.95))
    assert at1["sent_mb_per_step"] == pytest.approx(1.0) and at1["plain_mb_per_step"] == 4.0
    assert at1["accuracy_delta"] == pytest.approx(0.87 - 0.9)
    section = reducers.section(records, lambda name: str(tmp_path / name))
    assert "int8: pays off below 2.4 Gbit/s — measured at 1: faster; at 5: slower" \
        in section.markdown
    assert mpimg.imread(section.plots[0]).shape[1] > 400
    assert summary.summarize(records) == []  # compressed runs are no rows of the summary


def test_profiles_take_the_reducers_measured_on_the_same_model_and_batch():
    from results.model.workload_profile import reducer_key, reducers_of

    runs = [_run("int8", 0, 0.96, payload=MB), _run("int8", 1, 1.0, payload=MB),
            _run("none", 0, 0.8)]
    runs[1]["compression"]["compress_s"] = 0.004
    found = reducers_of(runs)
    key = reducer_key(reducers.setting_of(runs[0]))
    assert key == ("cnn", 64, "float32")
    assert found == {key: {"int8": {"payload_bytes": MB, "exchange": "gather",
                                    "compress_s": pytest.approx(0.003), "state_bytes": 4 * MB}}}


def test_zero_is_a_row_with_the_optimizer_state_a_worker_keeps():
    """--zero=1 in the reducers experiment: its own form (zero:1), the parameters' bytes
    reduce-scattered and all-gathered (a ring all-reduce's, as plain sends), and the optimizer
    state one worker keeps beside it."""
    zero = _run("none", 0, 0.84)
    zero["run_name"] = zero["run_name"].replace("reducers-none", "reducers-zero1")
    zero["config"]["zero"] = 1
    zero["zero"] = {"stage": 1, "payload_bytes": 4 * MB, "exchange": "reduce",
                    "optimizer_state_bytes_per_worker": 2 * MB}
    table = reducers.rows([_run("none", 0, 0.8), zero])
    (plain,) = [r for r in table if r["compression"] == "none"]
    (sharded,) = [r for r in table if r["compression"] == "zero:1"]
    assert sharded["sent_mb_per_step"] == pytest.approx(plain["sent_mb_per_step"]) == 4.0
    assert sharded["optimizer_state_mb"] == 2.0 and plain["optimizer_state_mb"] is None
    assert sharded["vs_plain"] == pytest.approx(0.8 / 0.84)
