"""EPOCH:VALUE schedules of a local cluster's emulations: the shaper's rate
(--emulate_bandwidth_schedule=0:1,2:0.05, tf_config/netshape.py) and a straggler's delay
(--straggler_schedule=0:0,3:60, experiments/engine/build.py). Pure Python: the launcher, the
validation and the chief read them alike."""


def parse(text, flag, unit, low, high, example, zero=False):
    """'0:1,2:0.05' -> [(0, 1.0), (2, 0.05)]: from after E epochs, the value. ValueError (one
    line naming --flag) unless it starts at epoch 0, epochs increase and every value is in
    (low, high] ([low, high] with zero=True)."""
    out = []
    for part in text.split(","):
        epoch, _, value = part.strip().partition(":")
        try:
            entry = (int(epoch), float(value))
        except ValueError:
            entry = None
        inside = entry is not None and (low <= entry[1] if zero else low < entry[1]) and \
            entry[1] <= high
        if not inside or (out and entry[0] <= out[-1][0]) or (not out and entry[0] != 0):
            raise ValueError(f"--{flag}={text}: give EPOCH:{unit} pairs, the first at epoch 0, "
                             f"epochs increasing, values in {'[' if zero else '('}{low:g}, "
                             f"{high:g}] (e.g. {example})")
        out.append(entry)
    return out


def text(schedule):
    """[(0, 1.0), (2, 0.05)] -> '0:1,2:0.05' (the flag's form; records say it)."""
    return ",".join(f"{epoch}:{value:g}" for epoch, value in schedule)


def value_at(schedule, epochs_done):
    """The schedule's value for the epoch after `epochs_done` finished ones."""
    return [value for epoch, value in schedule if epoch <= epochs_done][-1]
