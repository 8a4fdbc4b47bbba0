"""The API server: the Kubernetes REST API over the storage interface, the only component
that touches storage."""
