import pytest

from strategies import STRATEGIES, replicas_in_sync
from strategies.factory import get_strategy


def test_unknown_strategy_lists_valid_names():
    with pytest.raises(ValueError) as err:
        get_strategy("bogus")
    for name in STRATEGIES:
        assert name in str(err.value)


def test_one_device_has_one_replica():
    assert get_strategy("one_device").num_replicas_in_sync == 1


def test_unknown_collective():
    with pytest.raises(ValueError, match="valid: auto, ring"):
        get_strategy("multi_worker_mirrored", collective="nccl-ish")


def test_replicas_in_sync_per_strategy():
    assert replicas_in_sync("one_device", 4, 4) == 1
    assert replicas_in_sync("mirrored", 2, 1) == 2
    assert replicas_in_sync("multi_worker_mirrored", 1, 3) == 3
    # PSS is asynchronous: a step's batch belongs to one worker, whatever the worker count.
    assert replicas_in_sync("parameter_server", 1, 2) == 1


def test_gpus_required_but_none_visible_is_refused(monkeypatch):
    """A job that asked for GPUs never falls back to the CPU; one that did not still may."""
    import tensorflow as tf

    from strategies.factory import MissingGPUs, check_gpus

    real = tf.config.list_physical_devices
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: [] if kind == "GPU" else real(kind))
    check_gpus(0)  # not asked: nothing to check
    with pytest.raises(MissingGPUs, match=r"--require_gpus=2: the job asked for 2 GPU\(s\) but "
                                          r"TensorFlow sees none"):
        check_gpus(2)
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["gpu0"] if kind == "GPU" else real(kind))
    with pytest.raises(MissingGPUs, match="sees 1"):
        check_gpus(2)
    check_gpus(1)


def test_tpu_without_a_name_is_one_tpu_unavailable_line(monkeypatch):
    """No --tpu and nothing in the environment: the resolver's ValueError becomes one line that
    says what to give (raised before any connection, so safe in this process)."""
    from strategies.factory import TPUUnavailable

    for name in ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(TPUUnavailable) as err:
        get_strategy("tpu", tpu_timeout_s=30)
    message = str(err.value)
    assert "\n" not in message and message.startswith("--strategy=tpu: no TPU reachable")
    assert "--tpu=grpc://HOST:8470" in message
