"""kubelab: Kubernetes' core written in Python, running for real on Linux.

The top tier: the ``kubelab`` command (``cli``), which runs every component, and the lab
(``kubelab.lab``), which brings a multi-node cluster up in network namespaces or on VMs.  The
components stand below it (``controlplane``: storage, API server, scheduler, controllers,
cloud; ``node``: kubelet, CRI, CNI, kube-proxy), meeting only through the API, and they stand
on the shared base, ``kube``.  See docs/architecture.md.
"""
