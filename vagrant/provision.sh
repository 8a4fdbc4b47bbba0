#!/bin/bash
# Provision one VM of the Vagrant lab (run by the Vagrantfile as root, again on
# `vagrant provision`; every step is idempotent).
#
#   provision.sh controlplane controlplane
#   provision.sh worker node1
#
# 1. `make setup` from the synced source: the same Debian packages and venv as on a lab host.
# 2. `kubelab lab vagrant render`: this VM's component configuration (flags, containerd config,
#    resolv.conf) from vagrant/inventory.yaml, by the same code the netns lab starts its
#    components with.
# 3. One systemd unit per component from vagrant/units/, enabled and started in the rendered
#    order.
# 4. Credentials: once the control plane's API server made the cluster CA, the control plane
#    writes one bundle per node (CA, kubeconfig, kubelet serving certificate) and unpacks its
#    own; each worker fetches its bundle over SSH with the join key (a forced command,
#    vagrant/send-bundle.sh) before starting its units.
# 5. The lab registry on the control plane (every worker's containerd mirrors the public
#    registries to it): the private instance's htpasswd before its unit starts, then the
#    lab's images built and pushed once both registries run.
set -euo pipefail

readonly ROLE=${1:?usage: provision.sh controlplane|worker NAME}
readonly NAME=${2:?usage: provision.sh controlplane|worker NAME}
readonly SRC=/vagrant
readonly INVENTORY=$SRC/vagrant/inventory.yaml
readonly VENV=/opt/kubelab/venv
readonly KUBELAB=$VENV/bin/kubelab
readonly CONF=/etc/kubelab
readonly BUNDLES=/var/lib/kubelab/bundles
readonly JOIN_USER=kubelab-join
readonly JOIN_KEY=$SRC/vagrant/.secrets/join_ed25519
readonly FETCH_TIMEOUT=900

log() { echo "kubelab provision ($NAME): $*"; }

install_kubelab() {
  log "packages and kubelab"
  make -C "$SRC" setup VENV="$VENV"
  ln -sf "$KUBELAB" /usr/local/bin/kubelab
  ln -sf "$VENV/bin/kubectl" /usr/local/bin/kubectl
}

# Prints the components this VM runs, in start order (one unit each).
render_config() {
  "$KUBELAB" lab vagrant render --inventory "$INVENTORY" --node "$NAME" --out "$CONF"
}

start_unit() {
  local component=$1
  install -m 0644 "$SRC/vagrant/units/kubelab-$component.service" /etc/systemd/system/
  systemctl daemon-reload
  log "starting kubelab-$component"
  systemctl enable --now "kubelab-$component.service"
}

wait_for_file() {
  local file=$1 deadline=$((SECONDS + FETCH_TIMEOUT))
  until [ -s "$file" ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "timed out waiting for $file"
      exit 1
    fi
    sleep 2
  done
}

accept_join_key() {
  id -u "$JOIN_USER" >/dev/null 2>&1 || useradd --system --create-home "$JOIN_USER"
  install -m 0755 "$SRC/vagrant/send-bundle.sh" /usr/local/sbin/kubelab-send-bundle
  install -d -m 0700 -o "$JOIN_USER" "/home/$JOIN_USER/.ssh"
  printf 'restrict,command="/usr/local/sbin/kubelab-send-bundle" %s\n' "$(cat "$JOIN_KEY.pub")" \
    >"/home/$JOIN_USER/.ssh/authorized_keys"
  chown "$JOIN_USER" "/home/$JOIN_USER/.ssh/authorized_keys"
  chmod 0600 "/home/$JOIN_USER/.ssh/authorized_keys"
}

# Once the API server made the cluster CA: every node's credentials, the control plane's own
# unpacked here, the workers' handed out over SSH.
hand_out_credentials() {
  wait_for_file "$ADMIN_KUBECONFIG"
  "$KUBELAB" lab vagrant bundles --inventory "$INVENTORY" --out "$BUNDLES"
  tar -xf "$BUNDLES/$NAME.tar" -C /
  accept_join_key
  chgrp -R "$JOIN_USER" "$BUNDLES"
  chmod 0750 "$BUNDLES"
  chmod 0640 "$BUNDLES"/*.tar
  install -d -m 0700 /root/.kube
  ln -sf "$ADMIN_KUBECONFIG" /root/.kube/config
  install -d -m 0700 -o vagrant /home/vagrant/.kube
  install -m 0600 -o vagrant "$ADMIN_KUBECONFIG" /home/vagrant/.kube/config
}

fetch_credentials() {
  local controlplane bundle deadline=$((SECONDS + FETCH_TIMEOUT))
  controlplane=$("$KUBELAB" lab vagrant address --inventory "$INVENTORY" --node controlplane)
  bundle=$(mktemp)
  log "fetching this node's credentials from $controlplane"
  install -m 0600 "$JOIN_KEY" /root/.ssh-kubelab-join
  until ssh -i /root/.ssh-kubelab-join -o StrictHostKeyChecking=accept-new -o BatchMode=yes \
    "$JOIN_USER@$controlplane" "$NAME" >"$bundle"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "the control plane did not hand out credentials in ${FETCH_TIMEOUT}s"
      exit 1
    fi
    sleep 5
  done
  tar -xf "$bundle" -C /
  rm -f "$bundle"
}

case $ROLE in
  controlplane | worker) ;;
  *)
    echo "provision.sh: role must be controlplane or worker, got $ROLE" >&2
    exit 2
    ;;
esac
install_kubelab
log "component configuration"
rendered=$(render_config)
read -r -a components <<<"$rendered"
# shellcheck source=/dev/null  # written by render_config
. "$CONF/paths.env"
if [ "$ROLE" = controlplane ]; then
  sysctl -qw net.ipv4.ip_forward=1
  echo net.ipv4.ip_forward=1 >/etc/sysctl.d/90-kubelab.conf
else
  fetch_credentials
fi
# Ours replaces Debian's containerd.service (same binary, the lab's configuration).
systemctl disable --now containerd.service >/dev/null 2>&1 || true
for component in "${components[@]}"; do
  if [ "$component" = private-registry ]; then
    "$KUBELAB" lab vagrant registry-credentials --inventory "$INVENTORY"
  fi
  start_unit "$component"
  if [ "$component" = server ]; then
    hand_out_credentials
  fi
  if [ "$component" = private-registry ]; then
    log "the lab's images into the lab registry"
    "$KUBELAB" lab vagrant seed --inventory "$INVENTORY"
  fi
done
log "done"
