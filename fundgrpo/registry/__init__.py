"""The MLflow registry: register candidates and move aliases only through the gate."""
