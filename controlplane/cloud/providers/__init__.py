"""The in-tree cloud providers; importing this package registers them."""

import controlplane.cloud.providers.lab  # noqa: F401  (registers "lab")
