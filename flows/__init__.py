"""Prefect flows: `training` (flows/training_flow.py), `monitoring` (flows/monitoring_flow.py) and
`evaluation` (flows/evaluation_flow.py, the monthly scoring of the universe).

Deployments with schedules: prefect.yaml (a process work pool) or flows/serve.py;
see docs/operations.md.
"""
