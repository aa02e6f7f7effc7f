"""Keras 3 model builders. Names live here (no Keras import); build with
`models.registry.build(name, input_shape, num_classes)` inside `strategy.scope()`."""
MODELS = ("mlp", "cnn")
