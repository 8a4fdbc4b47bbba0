"""The control plane: storage, API server, scheduler, controllers and the cloud controllers.

Only the API server touches storage; every other component is an API client.  Nothing here
imports ``node``: the two sides meet only through the API (checked by import-linter).
"""
