"""Experiment backends that are not a Kubernetes cluster: :mod:`rlcloud.backends.local` (processes here)."""
