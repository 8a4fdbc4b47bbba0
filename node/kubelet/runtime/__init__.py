"""The kubelet's container runtime manager: pods of the API turned into CRI calls."""
