"""REST storage, as upstream's ``k8s.io/apiserver/pkg/registry`` and ``pkg/registry``.

``store`` is the generic store every kind is served by (create, update, patch, delete, list,
watch over the storage interface, with admission and the kind's strategy on every write);
``strategy`` holds what differs per kind.  Each subresource (status, scale, binding, eviction,
approval, token, the kubelet streams, proxy, ephemeralcontainers, finalize) is a small REST
object beside it, registered with its kind, so the endpoints dispatch on the verb and on the
interfaces a REST object implements, never on a subresource's name.
"""
