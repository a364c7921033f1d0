"""The MLflow registry: register candidates and move aliases only through the gate; sweeps as
queued DVC experiments, compared from their MLflow runs."""
