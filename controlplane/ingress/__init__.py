"""The lab's Ingress controller (``kubelab ingress``): networking.k8s.io/v1 Ingresses of its
IngressClass served by an HTTP/HTTPS reverse proxy of its own.

- ``routing``: Ingresses, Services, EndpointSlices and Secrets to one immutable routing table
  (hosts, paths, backends, certificates), with upstream's host and path matching;
- ``proxy``: the HTTP/1.1 reverse proxy on asyncio streams, TLS chosen by SNI;
- ``controller``: informers, which Ingresses are ours, the table rebuilt and swapped on every
  change, status.loadBalancer from the controller's own LoadBalancer Service;
- ``command``: the ``kubelab ingress`` command.
"""
