"""Every controller by name, in the order the controller-manager starts them."""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.controllers import serviceaccount
from controlplane.controllers.manager import ControllerFactory

CONTROLLERS: Mapping[str, ControllerFactory] = {
    serviceaccount.NAME: serviceaccount.new,
}

OFF_BY_DEFAULT: tuple[str, ...] = ()
"""Controllers ``*`` leaves out (upstream: bootstrapsigner, tokencleaner)."""
