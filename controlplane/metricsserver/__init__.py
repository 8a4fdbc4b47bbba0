"""``kubelab metrics-server``: the resource metrics pipeline behind ``kubectl top`` and the HPA.

As upstream's metrics-server: scrape every kubelet's ``/metrics/resource`` (``scraper``), keep
the last two points of every node and container (``storage``), which make CPU a rate over the
window between them, and serve ``metrics.k8s.io/v1beta1`` NodeMetrics and PodMetrics as an
extension API server behind the APIService ``v1beta1.metrics.k8s.io`` (``api``).

It lives in the control plane, beside the cluster DNS add-on: like it, it is a cluster add-on
that only talks to the API server and over HTTP to kubelets, and it serves an API with the API
server's own pieces (content negotiation, Tables from the kinds' printer columns, Status
errors, discovery documents), which the layering allows only within ``controlplane``.  It
imports nothing of ``node``: the kubelet's side is reached over the wire, in Prometheus text,
read with ``kube.metrics.parse``.
"""
