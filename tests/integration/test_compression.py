"""Gradient compression on real local clusters (--compression; experiments/engine/
compressed_sync.py): every worker ends with the same weights, each form learns, sends what its
record says, and topk of every value is plain MWMS to float64 rounding."""
import re

import pytest

from tests.helpers import TINY, TOLERANCE_FLOAT64, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration

# the probes of communication and compute are not what these tests check
MWMS = ["--strategy=multi_worker_mirrored", "--num_workers=2", "--nocomm_probe",
        "--nocompute_probe"]


def _checksums(output):
    return {k: float(v) for k, v in re.findall(r"\] (\w+:\d) weights checksum (\S+)", output)}


def test_topk_of_every_value_trains_as_plain_mwms(tmp_path):
    """topk:1 sends every value through the compressed path (gathered pairs, scattered sums,
    residuals of zero), and packs of 4 KiB all-reduce the same sums in other groups: Adam ends
    with plain MWMS's weights to float64 rounding (the tolerance holds on any CPU:
    tests/helpers.py). The control: int8 on the same run does not (and it learns, and sends an
    eighth of float64's bytes)."""
    common = [*MWMS, "--model=mlp", "--optimizer=adam", "--learning_rate=0.001", *TINY,
              "--float_dtype=float64"]
    sums = {}
    for name in ("none", "topk:1", "int8", "packs"):
        how = "--bytes_per_pack=4096" if name == "packs" else f"--compression={name}"
        proc = run_module("experiments.run", *common, how,
                          f"--results_dir={tmp_path / name.replace(':', '')}")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        sums[name] = _checksums(proc.stdout)
        assert len(set(sums[name].values())) == 1, sums  # the workers agree bit for bit
    plain, topk, int8, packs = (sums[k]["worker:0"] for k in ("none", "topk:1", "int8",
                                                              "packs"))
    assert abs(topk - plain) <= TOLERANCE_FLOAT64 * abs(plain)
    assert abs(packs - plain) <= TOLERANCE_FLOAT64 * abs(plain)
    assert abs(int8 - plain) > 1e3 * TOLERANCE_FLOAT64 * abs(plain)
    _learns_and_sends_less(tmp_path / "int8", "int8", 8)
    assert not processes_mentioning(str(tmp_path))


def _learns_and_sends_less(results_dir, form, fewer):
    (record,) = records_in(results_dir)
    c = record["compression"]
    assert c["method"] == form.split(":")[0]
    # (int8: 1 byte a value against float64's 8, plus a float32 scale per tensor)
    assert c["sent_bytes_per_step"] > 0
    assert c["plain_bytes_per_step"] / c["sent_bytes_per_step"] >= 0.99 * fewer
    assert c["compress_s"] > 0 and c["state_bytes_per_replica"] > 0
    assert record["final_eval_accuracy"] > 0.3  # plain MWMS on TINY: 0.4-0.5; chance 0.1


@pytest.mark.parametrize("form", ["topk:0.05", "powersgd:2"])
def test_each_form_learns_and_sends_less(tmp_path, form):
    proc = run_module("experiments.run", *MWMS, "--model=mlp", *TINY, f"--compression={form}",
                      f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sums = _checksums(proc.stdout)
    assert set(sums) == {"worker:0", "worker:1"} and len(set(sums.values())) == 1
    _learns_and_sends_less(tmp_path, form, 3)
    assert not processes_mentioning(str(tmp_path))
