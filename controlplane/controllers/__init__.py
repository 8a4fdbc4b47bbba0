"""The controllers of ``kubelab controller-manager``: one module each, all the same shape.

Each controller watches through the component's shared informers, turns every change into a
``namespace/name`` key on its workqueue, and reconciles that key from the caches, level-
triggered: it recomputes what should exist from what the caches say is there, never from
the event that woke it.  ``controller.Controller`` is that shape; ``manager`` runs the
enabled controllers together.
"""
