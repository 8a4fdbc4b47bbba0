"""API Priority and Fairness: the API server's flow control, as upstream's.

``classify`` matches requests to FlowSchemas, ``fairqueuing`` holds each limited priority
level's seats and queues, ``controller`` puts both in the request path (and serves the debug
dumps), and ``bootstrap`` is the configuration every server starts from.
"""
