"""What is trained: built-in and user datasets (datasets, npz_data, user_data), their tf.data
input pipelines (inputs), the user's model (user_model) and the checks of user code (user_code).

May import: models; TensorFlow in inputs, user_data and user_model only (datasets,
npz_data and user_code stay importable before TensorFlow, for validation).
"""
