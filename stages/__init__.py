"""The pipeline stages: one module per DVC stage (`python -m stages.<name>`), wired in dvc.yaml."""
