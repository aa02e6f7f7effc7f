"""What a run recorded, read back: store (the JSON record files, written atomically, local or
gs://), cells (a record's setting, role and N), metrics (steady state, speedup, scaling) and
step_stamps (the in-step stamps, per worker). May import: strategies, the standard library,
TensorFlow inside store's URL paths. Not results.model or results.report.
"""
