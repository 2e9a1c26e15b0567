"""The rulebook: findings matched against the model, with evidence and advice."""

# SEVERITIES: most severe first; a light module's so that --help needs no YAML or schema code.
SEVERITIES = ("high", "medium", "low", "info")
