"""kubelab: Kubernetes' core written in Python, running for real on Linux.

The shared base lives here: ``kubelab.api`` (every kind declared once, typed) and, later,
``kubelab.client`` (REST client, informers, workqueues, leader election).  The control plane
(``controlplane``) and the node (``node``) stand on it and meet only through the API server.
"""

__version__ = "0.1.0"
KUBERNETES_VERSION = "1.36.0"
"""The Kubernetes release whose API and behaviour kubelab follows."""
