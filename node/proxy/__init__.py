"""The kube-proxy: Service virtual IPs, NodePorts and load-balancer IPs programmed on a node.

``names`` spells the iptables chain names, ``model`` turns Services and EndpointSlices into
the records the rules depend on and tracks what changed, ``ruleset`` renders the rules (pure),
``proxier`` runs the sync loop against :mod:`node.iptables`, ``health`` serves /healthz and
/metrics, and ``command`` is ``kubelab proxy``.
"""
