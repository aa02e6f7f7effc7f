"""The plan's outputs (experiments/plan.py): plan.md (the target, the ranked table, what was
dropped and why, the best's commands), plan.csv (every configuration) and plan.png (predicted
throughput; memory per device against the cap), from results/model/planner.py's ranked list.

    python -m experiments.plan --profile=docs/examples/profile_resnet50_v100.json \
        --cluster=docs/examples/cluster_8x8_v100_25g.json
"""
import os

from results.model.planner import best, machines, sync_dtypes, tasks
from results.records.store import write_text_atomic
from results.report.tables import csv_text, markdown_table
from strategies import REGISTRY

COLUMNS = ("group", "rank", "configuration", "strategy", "workers", "hosts", "devices_per_host", "num_ps",
           "machines", "accumulation", "sync_dtype", "compression", "zero", "stages",
           "microbatches", "tensor_parallel", "pipeline_schedule", "global_batch",
           "examples_per_sec", "step_time_s", "compute_s", "overhead_s", "communication_s",
           "communication_share", "efficiency", "memory_per_device_mb", "fits_memory", "dropped")


# plan.csv's groups, ranked apart as plan.md ranks them (the terminal's best is the first's)
SAME_MATH, CHANGED_MATH = "same training math", "changes the training math"


def rows(planned, cluster):
    out, ranks = [], {SAME_MATH: 0, CHANGED_MATH: 0}
    for p in planned:
        c, pr = p.config, p.prediction
        group = CHANGED_MATH if p.changes else SAME_MATH
        if not p.dropped:
            ranks[group] += 1
        out.append(dict(
            group=group, rank=ranks[group] if not p.dropped else "", configuration=c.name,
            strategy=tasks(c)[0],
            workers=c.workers, hosts=c.hosts, devices_per_host=c.devices_per_host,
            num_ps=c.num_ps, machines=machines(c, cluster), accumulation=c.accumulation,
            sync_dtype=c.sync_dtype, compression=c.compression, zero=c.zero, stages=c.stages,
            microbatches=c.microbatches, tensor_parallel=c.tensor_parallel,
            pipeline_schedule=c.schedule,
            global_batch=p.global_batch, examples_per_sec=pr.examples_per_sec,
            step_time_s=pr.step_s, compute_s=pr.compute_s, overhead_s=pr.overhead_s,
            communication_s=pr.communication_s, communication_share=pr.communication_share,
            efficiency=pr.efficiency, memory_per_device_mb=pr.memory_per_device_bytes / 1e6,
            fits_memory=pr.fits_memory, dropped=p.dropped))
    return out


def markdown(planned, profile, cluster, commands, dtype_note=""):
    """plan.md: the target, the ranked table, the dropped configurations and why, the best's
    commands (experiments/config/planned_run.commands: the best's two command lines)."""
    fits = [p for p in planned if not p.dropped]
    dropped = [p for p in planned if p.dropped]
    cap = f", {cluster.memory_per_device_mb:g} MB per device" if cluster.memory_per_device_mb \
        else ", memory per device not limited"
    lines = ["# Plan", "",
             f"Target: {cluster.name + ': ' if cluster.name else ''}{cluster.hosts} host(s) x "
             f"{cluster.devices_per_host} device(s), {cluster.inter_host_gbps:g} Gbit/s between "
             f"hosts, {cluster.intra_host_gbps:g} Gbit/s within one, devices "
             f"{cluster.device_speedup:g}x the profile's{cap}.",
             f"Workload: {profile.model}, {profile.batch} examples per replica per step, compute "
             f"{profile.compute_s * 1e3:.2f} ms on {profile.device or 'its device'}, gradients "
             f"{profile.gradient(sync_dtypes(profile)[0]) / 1e6:.2f} MB "
             f"({sync_dtypes(profile)[0]}, {profile.gradient_kind})"
             + (f"; {dtype_note}" if dtype_note else "") + ".", "",
             f"{len(planned)} configurations predicted through results/model/cost_model.py; "
             f"{len(fits)} fit, {len(dropped)} dropped (memory). Ranked by predicted examples/s "
             "in two groups: those that train what the profile trained (same batch per update, "
             "same gradient rounding: the same training math), then those that change it "
             "(accumulation, 16-bit or compressed gradients: faster, but check the accuracy "
             "before you rely on them). Machines counts the workers' hosts and parameter "
             "servers on hosts of their own.", ""]
    same = [p for p in fits if not p.changes]
    changed = [p for p in fits if p.changes]
    for title, group in (("Same training math", same), ("Changes the training math", changed)):
        if not group:
            continue
        table = []
        for i, p in enumerate(group[:15], 1):
            pr = p.prediction
            table.append([str(i), p.config.name, str(machines(p.config, cluster)),
                          str(p.global_batch), f"{pr.examples_per_sec:.0f}",
                          f"{pr.step_s * 1e3:.2f}", f"{pr.communication_share * 100:.0f}%",
                          f"{pr.efficiency * 100:.0f}%",
                          f"{pr.memory_per_device_bytes / 1e6:.0f}", p.changes or "–"])
        lines += [f"## {title}", "", markdown_table(
            ["rank", "configuration", "machines", "global batch", "examples/s", "step ms",
             "communication share", "efficiency", "memory / device MB", "changes"], table)]
        if len(group) > 15:
            lines += ["", f"({len(group) - 15} more in plan.csv)"]
        lines.append("")
    best_per_n = {}
    for p in same:
        best_per_n.setdefault(p.config.workers, p)
    lines += ["Best at each device count (same training math): " + "; ".join(
        f"{n}: {p.config.name} ({p.prediction.examples_per_sec:.0f} ex/s)"
        for n, p in sorted(best_per_n.items())) + "."]
    if dropped:
        lines += ["", "Dropped:", ""] + [f"- {p.config.name}: {p.dropped}" for p in dropped[:20]]
        if len(dropped) > 20:
            lines.append(f"- ... {len(dropped) - 20} more (plan.csv)")
    chosen = best(planned)
    if chosen is not None:
        rate = chosen.prediction.examples_per_sec
        faster = [p for p in fits if p.changes and p.prediction.examples_per_sec > rate]
        lines += ["", f"## Best: {chosen.config.name}", "",
                  "The fastest configuration that trains what the profile trained (its batch "
                  "per update, its gradient sync dtype)."
                  + (f" Faster if your optimization allows it: {faster[0].config.name} "
                     f"({faster[0].prediction.examples_per_sec / rate:.2f}x; "
                     f"{faster[0].changes})." if faster else ""), "",
                  "Each task of the cluster (under the platform's TF_CONFIG; without one, a "
                  "local cluster):", "", "```",
                  commands[0],
                  "```", "", "On Vertex AI (or `--format=tfjob` for Kubeflow); give your image, "
                  "accelerator (on CPU machines, drop the accelerator flags) and output bucket:",
                  "", "```", commands[1], "```"]
    lines += ["", "Assumptions: those of the cost model (docs/scaling_model.md): synchronization "
              "overlaps compute only by the profile's measured overlap and never by more than the "
              "compute, links are full duplex "
              "and uncontended but for the fan-in stated, every worker is equally fast, "
              "pipeline stages are equal."]
    if not profile.boundary_activation_bytes:
        lines.append("Not planned: pipelines (model_parallel, hybrid): the profile does not say "
                     "what crosses a stage boundary (boundary_activation_bytes).")
    return "\n".join(lines) + "\n"


def plot(planned, cluster, path, top=20):
    """plan.png: predicted examples/s of the best configurations (colour: strategy), and memory
    per device against the cap."""
    from results.report.plots import plt, save  # matplotlib, only when drawing

    fits = [p for p in planned if not p.dropped][:top]
    shown = fits + [p for p in planned if p.dropped][:max(0, top - len(fits)) or 5]
    fig, (tput, mem) = plt.subplots(1, 2, figsize=(14, 0.32 * len(shown) + 1.8))
    labels = [p.config.name for p in shown]
    colors = [REGISTRY[p.config.strategy].color for p in shown]
    y = range(len(shown))
    tput.barh(y, [p.prediction.examples_per_sec if not p.dropped else 0 for p in shown],
              color=colors)
    tput.set_yticks(y, labels, fontsize=7)
    tput.invert_yaxis()
    tput.set_xlabel("predicted examples/s")
    tput.set_title("Predicted throughput (best first; dropped configurations: no bar)")
    for strategy in dict.fromkeys(p.config.strategy for p in shown):
        tput.bar(0, 0, color=REGISTRY[strategy].color, label=REGISTRY[strategy].label)
    tput.legend(fontsize=7, loc="lower right")
    mem.barh(y, [p.prediction.memory_per_device_bytes / 1e6 for p in shown],
             color=["tab:red" if p.dropped else "tab:gray" for p in shown],
             label="memory per device (red: over the cap)")
    if cluster.memory_per_device_mb:
        mem.axvline(cluster.memory_per_device_mb, color="black", linestyle="--",
                    label=f"cap {cluster.memory_per_device_mb:g} MB")
    mem.set_yticks(y, [""] * len(shown))
    mem.invert_yaxis()
    mem.set_xlabel("memory per device (MB)")
    mem.set_title("Memory per device against the cap")
    mem.legend(fontsize=7, loc="lower right")
    return save(fig, path)


def write(planned, profile, cluster, commands, out_dir, dtype_note=""):
    """plan.md, plan.csv and plan.png in out_dir (atomically); returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    path = lambda name: os.path.join(out_dir, name)  # noqa: E731
    return [write_text_atomic(path("plan.md"), markdown(planned, profile, cluster, commands,
                                                        dtype_note)),
            write_text_atomic(path("plan.csv"), csv_text(rows(planned, cluster), COLUMNS)),
            plot(planned, cluster, path("plan.png"))]
