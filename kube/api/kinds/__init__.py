"""Every kind the project serves, one module per API group and version.

Importing this package imports each module below it, and so registers every kind in
``kube.api.scheme.SCHEME``; anything that needs the whole scheme (the API server, clients,
OpenAPI) imports this package once.
"""

import importlib
import pkgutil

for _module in pkgutil.walk_packages(__path__, __name__ + "."):
    importlib.import_module(_module.name)
