"""Hollow nodes: many Nodes served by one process, with kubelets that run no containers.

Like upstream's kubemark, a hollow node registers a real Node object, keeps its Lease fresh
and moves the pods bound to it through their lifecycle (Running and Ready on arrival, gone
when deleted) without starting anything.  The scheduler and the controllers cannot tell the
difference, which is how they are tested and benchmarked at thousands of nodes, and how a user
tries the control plane without root.
"""
