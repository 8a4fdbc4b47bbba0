"""Client machinery shared by every component: kubeconfig, REST client, informers, workqueues."""
