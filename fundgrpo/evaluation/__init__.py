"""Agreement with the experts: metrics, backtests, and the non-LLM baselines; no model code."""
