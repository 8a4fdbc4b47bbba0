"""``kubelab doctor``: what is wrong with this node, the evidence, and how to fix it.

Every check of kubeadm's node preflight (``cmd/kubeadm/app/preflight/checks.go``) and of
k3s' ``check-config.sh`` that applies to a node that is already running, plus the pitfalls
this project met in its labs (``docs/lab-notes``): forwarding and bridge netfilter,
``route_localnet``, ``rp_filter``, rules in both iptables backends, conntrack, cgroup drivers,
the CNI configuration, pod CIDR routes, MTUs, resolv.conf loops, certificates, clock skew, the
node's Lease, kube-proxy's last sync and rules left for Services that no longer exist.

Why the node tier: the checks read the node (sysctls, files, routes, iptables, nftables) and
know what the node's components write (kube-proxy's chain names, the kubelet's CNI
configuration, containerd's configuration), so they reuse ``node.iptables``,
``node.nftables`` and ``node.proxy.names`` rather than restating them; they reach the cluster
only through the API, as every node component does, so they need nothing of the control
plane.  ``kubelab.lab`` (above) runs them inside a lab node (``kubelab lab doctor NODE``).

- ``access``: the two narrow interfaces the checks read through (``Host``: files, sysctls,
  commands, routes, links, sockets, HTTP; ``Cluster``: the API) with the real ones and fakes;
- ``check``: the shape of a check (name, what it reads, a coroutine giving a ``Finding``:
  pass, warn or fail, the evidence, the fix, and optionally a repair safe to apply) and the
  runner;
- ``system``, ``network``, ``cluster``: the checks, by what they look at;
- ``command``: ``kubelab doctor``.
"""
