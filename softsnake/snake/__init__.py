"""The soft snake: pressure latency model, open-loop gait controller and their experiments."""
