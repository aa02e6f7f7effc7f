"""The toolkit's commands, and the rooms they are built from.

Commands (flags and main only; each docstring gives its command lines):
    run        train one model under one strategy, launching a local cluster when needed
    compare    the comparison: plan the cells, run each as `run`, build the report
    report     rebuild the report from a results directory's records
    recommend  MWMS or PSS for a target cluster, from measured records
    plan       every data-parallel configuration on a target cluster, predicted and ranked
    vertex     a Vertex AI CustomJob or a Kubeflow TFJob that runs `run`

Sub-packages, one idea each (their __init__ says what each holds and may import):
    config/      RunConfig and LaunchConfig (each setting declared once), validation, flags
    workload/    built-in and user models and data, and their tf.data input pipelines
    engine/      one process's run: its role (task), what it builds, the Trainer, GPipe,
                 checkpoints, the record
    measure/     what a run measures besides time: communication, CPU, memory, FLOPs, profile,
                 versions
    comparison/  the comparison's presets, plan of cells, runner, and its plain-loop cells
    adaptive/    --adapt: a run as a chain of configurations, switched when the network drifts
    cloud/       job specs for platforms that set TF_CONFIG (Vertex AI, Kubeflow TFJob)
    bench/       hand-run benchmarks that only print figures (nothing imports them)

Data flow: flags -> RunConfig -> (local cluster: tf_config.launch runs `run` per task) ->
engine.task -> engine.build (model, optimizer, input) -> engine.training.Trainer ->
engine.record -> results (summary, report, plots).
"""
