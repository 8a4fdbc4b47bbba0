"""The certificates and kubeconfigs the API server writes under its data directory: the
serving certificate and CA (``serving``) and one client identity per component
(``identities``)."""
