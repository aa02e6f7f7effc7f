import time

import pytest

from experiments.measure import comm_probe


@pytest.mark.serial  # each 20 ms call must take under 80 ms
def test_a_probe_call_of_k_synchronizations_is_divided_by_k():
    # The PSS probe schedules steps_per_execution pull+push rounds per call, as training does.
    calls = []

    def call():
        calls.append(1)
        time.sleep(0.02)
    spread = comm_probe.timed(call, repeats=3, per_call=4)
    assert len(calls) == 3 + comm_probe._WARMUP
    assert 0.004 <= spread["median"] < 0.02 and spread["n"] == 3
