"""What the API server maintains itself while it runs, as upstream's
``pkg/controlplane/controller``: the bootstrap objects and Service IP/port allocation
(``bootstrap``), its identity and master leases behind the ``kubernetes`` Service
(``apiserverleases``), and the public ``cluster-info`` (``clusterinfo``)."""
