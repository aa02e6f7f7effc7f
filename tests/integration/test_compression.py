"""Gradient compression (--compression; experiments/engine/compressed_sync.py): on a real local
cluster every worker ends with the same weights and topk of every value is plain MWMS to float64
rounding; each form learns and sends what its record says."""
import re

import pytest

from tests.helpers import TINY, TOLERANCE_FLOAT64, processes_mentioning, records_in, run_module

pytestmark = pytest.mark.integration

# the probes of communication and compute are not what these tests check
NO_PROBES = ["--nocomm_probe", "--nocompute_probe"]
MWMS = ["--strategy=multi_worker_mirrored", "--num_workers=2", *NO_PROBES]


def _checksums(output):
    return {k: float(v) for k, v in re.findall(r"\] (\w+:\d) weights checksum (\S+)", output)}


def test_topk_of_every_value_trains_as_plain_mwms(tmp_path):
    """topk:1 sends every value through the compressed path (gathered pairs, scattered sums,
    residuals of zero); packs of 4 KiB all-reduce plain MWMS's sums in other groups. The two
    share no exchange code (--compression and --bytes_per_pack do not combine), so ending with
    the same Adam weights, float64 rounding apart (the tolerance holds on any CPU:
    tests/helpers.py), shows that each is plain MWMS's update: a third, plain run would catch
    only both exchanges going wrong in the same way. The control: int8 on the same run does not
    end there (and it learns, and sends an eighth of float64's bytes)."""
    common = [*MWMS, "--model=mlp", "--optimizer=adam", "--learning_rate=0.001", *TINY,
              "--float_dtype=float64"]
    sums = {}
    for name in ("topk:1", "packs", "int8"):
        how = "--bytes_per_pack=4096" if name == "packs" else f"--compression={name}"
        proc = run_module("experiments.run", *common, how,
                          f"--results_dir={tmp_path / name.replace(':', '')}")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        sums[name] = _checksums(proc.stdout)
        # the workers agree bit for bit
        assert set(sums[name]) == {"worker:0", "worker:1"} and len(set(sums[name].values())) == 1
    topk, packs, int8 = (sums[k]["worker:0"] for k in ("topk:1", "packs", "int8"))
    assert abs(topk - packs) <= TOLERANCE_FLOAT64 * abs(packs)
    assert abs(int8 - packs) > 1e3 * TOLERANCE_FLOAT64 * abs(packs)
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
    """Under mirrored's two replicas in one process: the exchange is the same code under every
    all-reduce strategy (the replica context's all_gather and all_reduce), and a cluster's
    collectives with it, its workers agreeing bit for bit, are the test above's (topk's
    all-gathers of pairs, int8's of packed values and scales; PowerSGD's all-reduce is the
    replica context's all_reduce that plain MWMS and its packs run there)."""
    proc = run_module("experiments.run", "--strategy=mirrored", "--num_replicas=2", *NO_PROBES,
                      "--model=mlp", *TINY, f"--compression={form}", f"--results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _learns_and_sends_less(tmp_path, form, 3)
