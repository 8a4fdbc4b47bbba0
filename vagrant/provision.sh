#!/bin/bash
# Provision one VM of the Vagrant lab (run by the Vagrantfile as root, again on
# `vagrant provision`; every step is idempotent).
#
#   provision.sh controlplane controlplane WORKERS
#   provision.sh worker node1 WORKERS
#
# WORKERS is the lab's worker count (the Vagrantfile's, which KUBELAB_VAGRANT_WORKERS may set).
# Nothing here needs the internet, since the VMs may have none:
# 1. The Debian packages of vagrant/node-packages: the project's box has them all; a box without
#    them (a public one, online) gets the missing ones from its mirror. Debian's own services
#    for containerd, etcd and the registry are stopped: the lab runs its own units.
# 2. kubelab into a venv from the synced source, with its dependencies from the wheels the host
#    put into the synced folder (vagrant/.wheels, `make vagrant-wheels`): pip without an index.
# 3. `kubelab lab vagrant render`: this VM's component configuration (flags, containerd config,
#    the sysctls and kernel modules the netns lab gives its nodes) from vagrant/inventory.yaml,
#    by the same code the netns lab starts its components with.
# 4. One systemd unit per component from vagrant/units/, enabled and started in the rendered
#    order.
# 5. Credentials: once the control plane's API server made the cluster CA, the control plane
#    writes one bundle per node (CA, kubeconfig, kubelet serving certificate) and unpacks its
#    own; each worker fetches its bundle over SSH with the join key (a forced command,
#    vagrant/send-bundle.sh) before starting its units.
# 6. The lab registry on the control plane (every worker's containerd mirrors the public
#    registries to it): the private instance's htpasswd, with the password the Vagrantfile made
#    on the host (vagrant/.secrets/registry/), before its unit starts. The host pushes the lab's
#    images into it once this VM is up (the Vagrantfile's trigger: `kubelab lab vagrant seed`).
set -euo pipefail

readonly ROLE=${1:?usage: provision.sh controlplane|worker NAME}
readonly NAME=${2:?usage: provision.sh controlplane|worker NAME WORKERS}
readonly WORKERS=${3:?usage: provision.sh controlplane|worker NAME WORKERS}
readonly SRC=/vagrant
readonly INVENTORY=$SRC/vagrant/inventory.yaml
readonly WHEELS=$SRC/vagrant/.wheels
readonly SECRETS=$SRC/vagrant/.secrets
readonly VENV=/opt/kubelab/venv
readonly KUBELAB=$VENV/bin/kubelab
readonly CONF=/etc/kubelab
readonly BUNDLES=/var/lib/kubelab/bundles
readonly JOIN_USER=kubelab-join
readonly JOIN_KEY=$SECRETS/join_ed25519
readonly DEBIAN_SERVICES=(containerd.service etcd.service docker-registry.service)
readonly FETCH_TIMEOUT=1800 # generous: under TCG the control plane takes many minutes

log() { echo "kubelab provision ($NAME): $*"; }

# The lab's `kubelab lab vagrant` commands, with this inventory and worker count.
lab_vagrant() {
  local command=$1
  shift
  "$KUBELAB" lab vagrant "$command" --inventory "$INVENTORY" --workers "$WORKERS" "$@"
}

install_packages() {
  local package missing=()
  while read -r package; do
    case $package in '#'* | '') continue ;; esac
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$package")
  done <"$SRC/vagrant/node-packages"
  if [ "${#missing[@]}" -eq 0 ]; then
    log "Debian packages: all in the box"
  else
    log "Debian packages: installing ${missing[*]} (the box lacks them)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
  systemctl disable --now "${DEBIAN_SERVICES[@]}" >/dev/null 2>&1 || true
}

install_kubelab() {
  if [ ! -d "$WHEELS" ]; then
    log "no $WHEELS: run \`make vagrant-wheels\` on the host, then \`vagrant provision\`"
    exit 1
  fi
  log "kubelab from the synced source, its dependencies from $WHEELS"
  [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --no-index --find-links "$WHEELS" --editable "${SRC}[kubectl]"
  ln -sf "$KUBELAB" /usr/local/bin/kubelab
  ln -sf "$VENV/bin/kubectl" /usr/local/bin/kubectl
}

# Prints the components this VM runs, in start order (one unit each).
render_config() {
  lab_vagrant render --node "$NAME" --out "$CONF"
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
  lab_vagrant bundles --out "$BUNDLES"
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
  controlplane=$(lab_vagrant address --node controlplane)
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
install_packages
install_kubelab
log "component configuration"
rendered=$(render_config)
read -r -a components <<<"$rendered"
# shellcheck source=/dev/null  # written by render_config
. "$CONF/paths.env"
# The kernel settings the netns lab gives its nodes (rendered; also applied at every boot).
xargs -r -n1 modprobe <"$MODULES_FILE"
sysctl -q -p "$SYSCTL_FILE"
if [ "$ROLE" = worker ]; then
  fetch_credentials
fi
for component in "${components[@]}"; do
  if [ "$component" = private-registry ]; then
    lab_vagrant registry-credentials --secrets "$SECRETS"
  fi
  start_unit "$component"
  if [ "$component" = server ]; then
    hand_out_credentials
  fi
done
log "done"
