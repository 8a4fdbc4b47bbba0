"""``python -m kubelab``: the same as the ``kubelab`` command."""

import sys

from kubelab.cli import main

sys.exit(main())
