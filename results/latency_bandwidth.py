"""Latency and bandwidth (alpha, beta) of one synchronization, fitted to a sweep of message sizes
of the real collectives (experiments/measure/comm_probe.py `sweep`); results/scaling_model.py
prices this machine's synchronization with N processes from it.
"""
import dataclasses

from results.specs import SpecError

SWEEP_SPLIT_BYTES = 65536  # the sweep's message cut into 1, 4, 16 tensors (per-tensor cost)


@dataclasses.dataclass(frozen=True)
class LatencyBandwidth:
    """t(bytes, tensors) = alpha_s + per_tensor_s x (tensors - 1) + beta_s_per_byte x bytes for
    one synchronization, fitted to a sweep of message sizes and tensor counts
    (experiments/measure/comm_probe.py `sweep`); residuals: (fit - measured) / measured per
    one-tensor size, smallest first."""
    alpha_s: float
    beta_s_per_byte: float
    sizes: tuple
    residuals: tuple
    per_tensor_s: float = 0.0

    def seconds(self, nbytes, tensors=1):
        return self.alpha_s + self.per_tensor_s * max(0, tensors - 1) + \
            self.beta_s_per_byte * nbytes

    @property
    def gbps(self):
        """The bandwidth 1 / beta, in Gbit/s of message bytes (not of link traffic)."""
        return 8 / self.beta_s_per_byte / 1e9 if self.beta_s_per_byte > 0 else float("inf")


def fit_latency_bandwidth(points, split=()):
    """LatencyBandwidth of [(bytes, seconds)] one-tensor messages, by least squares on relative
    error (each point weighted 1 / seconds^2, so 4 KiB counts as much as 16 MiB; plain least
    squares would fit the largest messages and leave alpha to noise), alpha and beta kept >= 0;
    split: [(tensors, seconds)] of one size cut into that many tensors, whose slope is the cost
    per extra tensor (>= 0)."""
    points = sorted((float(b), float(t)) for b, t in points if t and t > 0)
    if len({b for b, _ in points}) < 2:
        raise SpecError(f"a latency-bandwidth fit needs 2 message sizes or more, got "
                        f"{len({b for b, _ in points})}")
    w = [1 / t ** 2 for _, t in points]
    sw = sum(w)
    sx = sum(wi * b for wi, (b, _) in zip(w, points))
    sy = sum(wi * t for wi, (_, t) in zip(w, points))
    sxx = sum(wi * b * b for wi, (b, _) in zip(w, points))
    sxy = sum(wi * b * t for wi, (b, t) in zip(w, points))
    beta = max(0.0, (sw * sxy - sx * sy) / (sw * sxx - sx * sx))
    alpha = max(0.0, (sy - beta * sx) / sw)
    if alpha == 0.0:  # refit beta alone through the origin
        beta = sxy / sxx
    per_tensor = 0.0
    split = sorted(split)
    if len(split) >= 2:
        mk = sum(k for k, _ in split) / len(split)
        mt = sum(t for _, t in split) / len(split)
        per_tensor = max(0.0, sum((k - mk) * (t - mt) for k, t in split) /
                         sum((k - mk) ** 2 for k, _ in split))
    return LatencyBandwidth(alpha, beta, tuple(int(b) for b, _ in points),
                            tuple((alpha + beta * b - t) / t for b, t in points), per_tensor)
