"""The node side of kubelab: kubelet, CRI client, CNI plugin and kube-proxy."""
