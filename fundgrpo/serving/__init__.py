"""Evaluations for users: batch files, the REST API, the dashboard, the champion's grades."""
