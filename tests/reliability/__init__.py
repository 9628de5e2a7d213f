"""Reliability suite (issue 21): killed replicas, a killed launcher or service, load, bad
input and cleanup, each with tiny commands instead of training (seconds each)."""
