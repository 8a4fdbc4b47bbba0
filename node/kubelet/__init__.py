"""The node agent: pods on containerd over CRI."""
