"""The test session runs TensorFlow with the toolkit's own settings (experiments/engine/tf_settings.py),
so in-process tests use the same CPU kernels as the runs they check."""
from experiments.engine import tf_settings

tf_settings.apply()
