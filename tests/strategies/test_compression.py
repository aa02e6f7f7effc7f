"""--compression's forms and the bytes each makes a replica send (strategies/compression.py)."""
import pytest

from strategies import compression


def test_bytes_each_replica_sends():
    shapes = [(1000, 100), (100,)]
    plain = 2 * (2 - 1) / 2 * 4 * 100_100
    got = compression.sent_bytes(compression.parse("int8"), shapes, 2)
    assert got["plain_bytes_per_step"] == plain
    assert got["sent_bytes_per_step"] == 100_100 + 8  # 1 byte a value, 2 scales
    assert compression.sent_bytes(compression.parse("topk:0.01"), shapes, 2)[
        "sent_bytes_per_step"] == 8 * (1000 + 1)
    assert compression.sent_bytes(compression.parse("powersgd:4"), shapes, 2)[
        "sent_bytes_per_step"] == 4 * (4 * 1100 + 100)
    # int8's all-gather grows with N: (N-1) bytes a value against 8(N-1)/N, as many at N=8
    assert compression.sent_bytes(compression.parse("int8"), shapes, 7)["sent_bytes_per_step"] \
        < compression.sent_bytes(compression.parse("int8"), shapes, 7)["plain_bytes_per_step"]
    assert compression.sent_bytes(compression.parse("int8"), shapes, 10)["sent_bytes_per_step"] \
        > compression.sent_bytes(compression.parse("int8"), shapes, 10)["plain_bytes_per_step"]


@pytest.mark.parametrize("bad", ["topk", "topk:0", "topk:1.5", "topk:x", "powersgd:0",
                                 "int4", "int8:2", "powersgd"])
def test_bad_compression_names_the_value_and_the_forms(bad):
    with pytest.raises(ValueError, match=f"--compression='{bad}' is not valid; choose one of: "
                                         "none, bf16, int8, topk:RATIO"):
        compression.parse(bad)
