"""Job specs for platforms that set TF_CONFIG themselves: what every job shares (jobspec), a
Vertex AI CustomJob (vertex_job), a Kubeflow TFJob (tfjob). Plain dicts; the SDKs are optional.

May import: strategies (names and Kinds); nothing else of the toolkit (pure data, YAML).
"""
