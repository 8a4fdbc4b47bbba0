"""NetworkPolicy enforcement on a node: ``kubelab network-policy``.

- :mod:`node.netpol.compiler`: Pods, Namespaces and NetworkPolicies to the node's nftables
  table (pure; the semantics and the table's layout are in its docstring);
- :mod:`node.netpol.agent`: the informers and the sync loop that applies the table through
  :class:`node.nftables.Nftables` in one transaction;
- :mod:`node.netpol.command`: the command line.
"""
