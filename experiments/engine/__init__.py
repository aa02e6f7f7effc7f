"""One process's run. tf_settings (process-wide settings made before TensorFlow loads), task
(plays this process's role: single process, chief, worker, ps), build (what the task builds and
hands the Trainer: model, stages, optimizer, batch arithmetic, input), training (the Trainer: the one
loop every strategy shares), gpipe (the pipeline schedule of model_parallel and hybrid),
checkpoints, and record (the record the chief writes).

May import: experiments.config, experiments.workload, experiments.measure, experiments.adaptive
(segment: --adapt's check after each epoch), models, strategies, results.records (metrics, store,
step_stamps), tf_config. Not experiments.comparison or the commands.
"""
