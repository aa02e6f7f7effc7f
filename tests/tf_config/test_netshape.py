"""--emulate_bandwidth_schedule: parsed, refused in one line, and the rate of each epoch."""
import pytest

from tf_config import netshape, schedules


def test_a_schedule_gives_each_epoch_its_rate():
    schedule = netshape.parse_schedule("0:1, 2:0.05,5:2")
    assert schedule == [(0, 1.0), (2, 0.05), (5, 2.0)]
    # the rate of the epoch after k finished ones: epochs 1-2 at 1, 3-5 at 0.05, then 2
    assert [schedules.value_at(schedule, k) for k in range(7)] == [1, 1, 0.05, 0.05, 0.05, 2, 2]


@pytest.mark.parametrize("text", ["1:1", "0:1,0:2", "0:1,3:0.5,2:1", "0:0", "0:1,2", "0:2000",
                                  "zero:1", ""])
def test_a_bad_schedule_is_refused_naming_it(text):
    with pytest.raises(ValueError, match=f"--emulate_bandwidth_schedule={text}: give EPOCH:GBPS"):
        netshape.parse_schedule(text)


def test_no_schedule_changes_nothing(monkeypatch):
    monkeypatch.delenv(netshape.SHAPE_ENV, raising=False)
    monkeypatch.delenv(netshape.APPLIED_ENV, raising=False)
    assert netshape.follow_schedule(3) is None
    # asked for, but best effort ran on the real network: nothing to follow
    monkeypatch.setenv(netshape.SHAPE_ENV, '{"gbps": 1, "latency_ms": 0, "best_effort": true, '
                                           '"schedule": [[0, 1], [2, 0.05]]}')
    monkeypatch.setenv(netshape.APPLIED_ENV, '{"emulated_gbps": null}')
    assert netshape.follow_schedule(3) is None
