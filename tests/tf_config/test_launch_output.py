"""What the launcher shows of a task's output (tf_config.task_output)."""
import pytest

from tf_config.task_output import ConsoleFilter, died_of_lost_peer, is_startup_noise


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


def _shown(lines, verbose=False):
    console = ConsoleFilter(verbose)
    out = [shown for line in lines for shown in console.feed(line)]
    return out + console.end()


# What a PSS chief printed when worker:1 was lost (2026-11-23, TF 2.21), one of five such entries.
_COORDINATOR_ON_LOSS = [
    "Epoch 2/2",
    "E0000 00:00:1795421190.150306   17203 context.cc:873] Failed to register function remotely "
    "due to failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:50491: "
    "Failed to connect to remote host: Connection refused",
    "Additional GRPC error information from remote target /job:worker/replica:0/task:1 while "
    "calling /tensorflow.eager.EagerService/Enqueue:",
    ':UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"failed to connect"}',
    "This could happen if the remote target has been disconnected from the client.",
    "E1123 08:06:29.860851 139702400906944 cluster_coordinator.py:949] Worker "
    "/job:worker/replica:0/task:1 failed with UnavailableError():recvmsg:Connection reset by peer",
    "8/8 - 0s - 28ms/step - loss: 0.6615 - accuracy: 0.7949",
    "tfdist-step: 16",
    "chief:0 weights checksum 9.852316793e+03",
]


def test_grpc_errors_about_a_lost_peer_and_markers_are_hidden():
    assert _shown(_COORDINATOR_ON_LOSS) == [
        "Epoch 2/2", "8/8 - 0s - 28ms/step - loss: 0.6615 - accuracy: 0.7949",
        "chief:0 weights checksum 9.852316793e+03"]
    assert _shown(_COORDINATOR_ON_LOSS, verbose=True) == [
        line for line in _COORDINATOR_ON_LOSS if not line.startswith("tfdist-")]


def test_a_worker_outliving_its_chief_by_a_moment_says_nothing():
    # An MWMS (hybrid) worker whose heartbeat found the chief already gone after the run's
    # success (2026-11-23, TF 2.21): the run had ended well, the message alarms for nothing.
    lines = ["worker:1 weights checksum 9.706660624e+03",
             "E0000 00:00:1795452697.408399   28100 base_collective_executor.cc:252] "
             "BaseCollectiveExecutor::StartAbort UNAVAILABLE: Failed to send RPC to coordination "
             "service. Either the leader task was preempted/died/restarted unexpectedly or this "
             "task is experiencing network issues.",
             "Additional GRPC error information from remote target /job:worker/replica:0/task:0 "
             "while calling /tensorflow.CoordinationService/Heartbeat:",
             ':UNKNOWN:Error received from peer  {grpc_message:"failed to connect to all '
             'addresses", grpc_status:14}']
    assert _shown(lines) == lines[:1]


def test_a_traceback_is_shown_whole_unless_its_task_died_of_a_lost_peer():
    bug = ["Epoch 1/2", "Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
           "ZeroDivisionError: division by zero"]
    assert _shown(bug) == bug
    peer = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
            "tensorflow.python.framework.errors_impl.UnavailableError: Graph execution error:",
            "Collective ops is aborted by: recvmsg:Connection reset by peer"]
    assert _shown(peer) == ["stopped: its peer was lost (UnavailableError; traceback in its log)"]


def test_a_chief_that_read_from_a_restarted_worker_died_of_a_lost_peer():
    # The PSS chief's first fetch after worker:1 was restarted under it (2026-11-23, TF 2.21).
    lines = ["Traceback (most recent call last):", "    remote[0].fetch()",
             "tensorflow.python.framework.errors_impl.AbortedError: {{function_node "
             "__wrapped__Identity}} RecvTensor expects a different device incarnation: 827 vs. "
             '933. Your worker job ("/job:worker/replica:0/task:1") was probably restarted.']
    assert died_of_lost_peer(lines)
    assert _shown(lines) == ["stopped: its peer was lost (AbortedError; traceback in its log)"]
    assert not died_of_lost_peer(["ZeroDivisionError: division by zero"])


def test_tensorflow_deprecation_inside_its_own_code_is_hidden():
    lines = ["W1123 08:10:24.933952 140417421249408 deprecation.py:50] From /venv/lib/python3.11/"
             "site-packages/tensorflow/python/distribute/failure_handling/failure_handling.py:1066:"
             " PreemptionCheckpointHandler.total_run_calls (from tensorflow) is deprecated",
             "Instructions for updating:",
             "Track steps using a tf.Variable saved in checkpoint instead.",
             "preempted: checkpoint saved after step 12"]
    assert _shown(lines) == ["preempted: checkpoint saved after step 12"]


def test_a_finished_peer_reported_unhealthy_at_shutdown_is_hidden():
    # worker:0 of a finished MWMS run when worker:1 exited first (2026-11-23, TF 2.21).
    lines = ["steady state: 4.747 s/epoch, 215.7 examples/s; final eval accuracy 0.8906",
             "E0000 00:00:1795422529.872257    1260 base_collective_executor.cc:252] "
             "BaseCollectiveExecutor::StartAbort UNAVAILABLE: Error reported from /job:worker/"
             "task:1: The following tasks are unhealthy (stopped sending heartbeats):",
             "/job:worker/replica:0/task:1",
             "The tasks have crashed. Check the task logs for an earlier error, or scheduler events"]
    assert _shown(lines) == lines[:1]


def test_a_traceback_the_task_survives_is_released_by_its_next_progress_line():
    lines = ["Epoch 1/2", "Traceback (most recent call last):", '  File "x.py", line 1',
             "UnavailableError: a peer was slow (caught, retried)", "Epoch 2/2"]
    assert _shown(lines) == lines


def test_only_the_final_exception_decides_whether_a_peer_was_lost():
    lines = ["W1123 ... Connection reset by peer (a warning earlier on)",
             "Traceback (most recent call last):", "ValueError: a bug of its own"]
    assert not died_of_lost_peer(lines)
