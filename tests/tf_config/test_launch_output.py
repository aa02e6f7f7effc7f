"""What the launcher shows of a task's output."""
import pytest

from tf_config.launch import is_startup_noise


@pytest.mark.parametrize("line", [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795418233.078285    5227 port.cc:153] oneDNN custom operations are on.",
    "I0000 00:00:1795418233.078787    5229 cudart_stub.cc:31] Could not find cuda drivers",
    "E0000 00:00:1795418233.904020    5229 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
])
def test_tensorflow_startup_chatter_is_hidden(line):
    assert is_startup_noise(line)


@pytest.mark.parametrize("line", [
    "Epoch 1/2",
    "8/8 - 1s - 131ms/step - loss: 2.8354 - accuracy: 0.2520",
    "E0000 00:00:1795418233.904020    5229 grpc_server.cc:52] Could not start gRPC server",
    "Traceback (most recent call last):",
    "worker:0 weights checksum 9.815959970e+03",
])
def test_progress_and_real_errors_are_shown(line):
    assert not is_startup_noise(line)
