"""The kubelet's CRI client side; the generated gRPC stubs live in node.cri.pb."""
