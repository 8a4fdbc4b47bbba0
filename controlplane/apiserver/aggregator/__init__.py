"""API aggregation, as upstream's kube-aggregator in front of the API server.

``autoregister`` keeps a local APIService for every group/version the server serves itself;
``proxy`` sends requests for a group/version an extension server answers (a non-local
APIService) to it, with the front-proxy client certificate and the caller's identity in
headers, and fetches its discovery documents; ``available`` keeps each APIService's
``Available`` condition.  ``server.py`` wires them into the request pipeline, after
authentication (authorization of proxied requests is the extension server's own).
"""
