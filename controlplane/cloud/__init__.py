"""The cloud-controller-manager and the cloud-provider interface it runs against.

- :mod:`.provider`: the interface a cloud implements (Protocols, sentinel errors);
- :mod:`.registry`: providers by name, registered at import time or found as entry points;
- :mod:`.context`: what the cloud controllers share (the cloud, options, a periodic resync);
- :mod:`.instances`: asking about a Node's instance through InstancesV2 or Instances;
- :mod:`.cloudnode`, :mod:`.cloudnodelifecycle`, :mod:`.route`, :mod:`.service`: the
  controllers, with the shape of every other controller and run by the same manager;
  :mod:`.controllers` names them;
- :mod:`.command`: ``kubelab cloud-controller-manager`` (also run by ``kubelab server``);
- :mod:`.rbac`: the component's ClusterRole, as data;
- :mod:`.fake`: a cloud in memory, public for tests of controllers and providers;
- :mod:`.providers`: the in-tree providers (``lab``: the lab as a small cloud).
"""
