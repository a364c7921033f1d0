"""Prefect flows: `training` (flows/training_flow.py) and `monitoring` (flows/monitoring_flow.py).

Deployments with schedules: prefect.yaml (a process work pool) or flows/serve.py;
see docs/operations.md.
"""
