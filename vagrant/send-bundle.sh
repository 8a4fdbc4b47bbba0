#!/bin/bash
# The control plane's forced command for the join key (see provision.sh): a worker asks for
# its credentials by node name and gets that node's bundle (a tar) on stdout, nothing else.
set -euo pipefail

readonly BUNDLES=/var/lib/kubelab/bundles
readonly NODE=${SSH_ORIGINAL_COMMAND:-}

if [[ ! $NODE =~ ^[a-z][a-z0-9-]{0,62}$ ]] || [ ! -f "$BUNDLES/$NODE.tar" ]; then
  echo "kubelab-send-bundle: no bundle for node '$NODE'" >&2
  exit 1
fi
exec cat "$BUNDLES/$NODE.tar"
