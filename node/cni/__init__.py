"""kubelab's CNI plugin: the ``kubelab-cni`` executable that the container runtime runs to wire
a pod sandbox into the node's bridge network (CNI spec 1.0.0, also 0.4.0).

The plugin is three layers, so that most of it is tested without root:

- :mod:`node.cni.plugin` speaks the CNI protocol (environment variables, network config on
  stdin, result or error JSON on stdout) and decides *what* to do;
- :mod:`node.cni.ipam` hands out pod IPs from the node's podCIDR, host-local style, with one
  locked file per address under the node's state directory (pure stdlib: files and ``fcntl``);
- :mod:`node.cni.network` does the netlink work with pyroute2 (bridge ``cni0``, a veth pair
  whose peer is born inside the pod's netns as ``eth0``, address, default route, hairpin) and
  the NAT rules (masquerade, hostPort DNAT) through one ``iptables-restore --noflush`` call.

Because the runtime starts the executable for every call, the executable is a stdlib-only
shim (:mod:`node.cni.shim`) that hands the call to :mod:`node.cni.agent`, a server the kubelet
runs in the node's netns with pyroute2 already imported, and runs the plugin in-process only
when no agent answers.  :mod:`node.cni.netconf` renders the node's ``.conflist`` and installs
the executables, either for this plugin or for the reference plugins (``bridge`` +
``host-local`` + ``portmap`` from /usr/lib/cni), which read a config of the same shape.
"""
