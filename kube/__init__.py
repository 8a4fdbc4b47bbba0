"""The shared base of kubelab: what every component process stands on.

``kube.api`` declares every kind once, typed (decoding, defaults, validation, tables,
OpenAPI, protobuf); ``kube.client`` talks to the API server (REST client, informers,
workqueues, leader election, events); ``component``, ``clock``, ``metrics``, ``pki``,
``table`` and the rest are what every component's process shares.  Nothing here imports the
components (``controlplane``, ``node``) or the ``kubelab`` command and lab above them:
import-linter checks the tiers.
"""

__version__ = "0.1.0"
KUBERNETES_VERSION = "1.36.0"
"""The Kubernetes release whose API and behaviour kubelab follows."""
