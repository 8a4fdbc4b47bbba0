"""API aggregation, as upstream's kube-aggregator in front of the API server.

``autoregister`` keeps a local APIService for every group/version the server serves itself;
``proxy`` sends requests for a group/version an extension server answers (a non-local
APIService) to it, with the front-proxy client certificate and the caller's identity in
headers, and fetches its discovery documents; ``available`` keeps each APIService's
``Available`` condition; ``frontproxy`` holds the front-proxy certificates and the
requestheader authentication.  ``server.py`` wires them into the request pipeline: a proxied
request has passed authentication and authorization, as upstream's aggregator's handler chain;
the extension server authorizes it again itself (SubjectAccessReview, ``kube.client.delegation``).
"""
