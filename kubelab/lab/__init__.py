"""The multi-node lab: nodes in network namespaces on one machine, and what they need offline."""
