"""``kubelab dns``: the cluster DNS add-on (what CoreDNS is in a kubeadm cluster).

``source`` reads Services, EndpointSlices and Namespaces from informers, ``zone`` turns them
into answers per the Kubernetes DNS specification, ``forward`` relays other names to the
node's resolvers, ``server`` listens on UDP and TCP, ``health`` serves the probes and metrics,
and ``command`` wires them to flags.  Parsing and rendering DNS messages is dnspython's.
"""
