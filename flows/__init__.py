"""Prefect flows: `training` (flows/training.py) and `monitoring` (flows/monitoring.py).

Deployments with schedules: prefect.yaml (a process work pool) or flows/serve.py;
see docs/operations.md.
"""
