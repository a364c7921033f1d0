"""Monitoring: new fund data batches, drift against the training reference, relearning.

    monitoring.simulate   drop a later synthetic batch (optionally under a regime shift) into the watched folder
    monitoring.batches    find, load, quarantine, accept and archive batches (and the DVC stage `batches`)
    monitoring.drift      Evidently data drift and prediction drift, with a verdict or the reason for none
    (the champion's grades on a batch, for prediction drift and batch backtests: fundgrpo.serving.champion)

The orchestration lives in flows/monitoring_flow.py.
"""
