"""The HTTP side of resource requests, as upstream's ``k8s.io/apiserver/pkg/endpoints``.

A request is parsed into a ``RequestInfo`` (``requestinfo``), dispatched by ``handlers`` to the
REST storage its path names, and answered in the representation the client negotiated
(``negotiation``: JSON, YAML, protobuf, Tables from ``tables``, PartialObjectMetadata).  Patches
(``patch``) and server-side apply (``apply``) turn a body into the object a store writes;
``discovery`` describes what is served; ``audit`` records requests.  Nothing here decides what
an object may be, or how a subresource is served: that is the registry's job.
"""
