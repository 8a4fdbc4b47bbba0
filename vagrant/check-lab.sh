#!/bin/bash
# The lab on VMs, checked end to end (`make vagrant-lab`; tens of minutes under TCG, so never
# part of `make test`). Run as root on the host, from the repository, after `make
# vagrant-setup`:
#
# 1. the lab's images in this host's cache (`kubelab images build`, here, where Debian's mirror
#    answers: the Vagrantfile pushes them into the control plane's registry from inside the
#    namespace, which has no way out), then `kubelab vagrant up`: the control plane and
#    KUBELAB_VAGRANT_WORKERS (default 2) workers as VMs, with libvirt in its own namespace;
# 2. every node Ready;
# 3. vagrant/check/web.yaml: nginx by its untagged name, one replica on each worker, a NodePort
#    Service, and a busybox pod to ask from;
# 4. the Service's VIP and its NodePort on every node answer, from the control-plane VM and
#    from the pod (through `kubectl exec`), and `kubectl logs` shows the requests;
# 5. `kubelab vagrant down`: no VM, daemon, namespace or volume left (also when a step fails;
#    KUBELAB_VAGRANT_KEEP=1 keeps the VMs to look at, `kubelab vagrant down` removes them).
#
# Every line is timestamped into the log (KUBELAB_VAGRANT_LOG); the end prints each step's time.
set -euo pipefail

cd "$(dirname "$0")/.."
readonly KUBELAB=.venv/bin/kubelab
readonly NETNS=kubelab-vm
LOG=${KUBELAB_VAGRANT_LOG:-/var/log/kubelab-vagrant-lab-$(date -u +%Y%m%dT%H%M%S).log}
readonly LOG
readonly READY_TIMEOUT=${KUBELAB_VAGRANT_READY_TIMEOUT:-1800}
readonly ROLLOUT_TIMEOUT=${KUBELAB_VAGRANT_ROLLOUT_TIMEOUT:-900}
export KUBELAB_VAGRANT_WORKERS=${KUBELAB_VAGRANT_WORKERS:-2}
SSH_CONFIG=$(mktemp)
readonly SSH_CONFIG
START=$SECONDS
readonly START
times=()

log() { echo "$(date -u +%T) check-lab: $*" | tee -a "$LOG"; }

# Each line of a step's output, timestamped, to the terminal and the log.
stamped() {
  local line
  while IFS= read -r line; do
    printf '%s %s\n' "$(date -u +%T)" "$line"
  done | tee -a "$LOG"
}

fail() {
  log "FAILED: $*"
  exit 1
}

# Ends a step: its time since the previous one, for the summary.
step_done() {
  local now=$((SECONDS - START))
  times+=("$(printf '%-40s %5ds (at %5ds)' "$1" "$((now - ${last_step:-0}))" "$now")")
  last_step=$now
  log "passed: $1"
}

# A command on the control-plane VM, as root (the admin kubeconfig is root's); ssh hands the
# remote shell one string, so each word is quoted for it.
on_controlplane() {
  ip netns exec "$NETNS" ssh -F "$SSH_CONFIG" -o LogLevel=ERROR controlplane \
    "sudo $(printf '%q ' "$@")"
}

# kubectl on the control plane, tried again a few times: under TCG the API server, busy
# starting the controllers, can take longer than kubectl's 10 s TLS handshake timeout.
kubectl() {
  local attempt
  for attempt in 1 2 3 4 5; do
    on_controlplane kubectl "$@" && return
    [ "$attempt" -lt 5 ] && sleep 10
  done
  return 1
}

# Retries "$@" (quietly) every 5 s until it succeeds or $1 seconds passed.
until_ok() {
  local timeout=$1 deadline
  shift
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 5
  done
}

ready_nodes() {
  on_controlplane kubectl get nodes --no-headers | awk '$2 == "Ready"' | wc -l
}

all_ready() {
  [ "$(ready_nodes)" -eq "$((KUBELAB_VAGRANT_WORKERS + 1))" ]
}

# The page $1 serves, asked from the control-plane VM or, with --pod, from the probe pod.
nginx_answers() {
  if [ "$1" = --pod ]; then
    on_controlplane kubectl exec probe -- timeout 10 wget -qO- "http://$2/" | grep -q 'Welcome to nginx'
  else
    on_controlplane curl -sf -m 10 "http://$1/" | grep -q 'Welcome to nginx'
  fi
}

# When each VM was booted (SSH answered) and provisioned, from `vagrant up`'s stamped output.
vm_times() {
  local machine booted provisioned
  for machine in controlplane $(seq -f 'node%g' 1 "$KUBELAB_VAGRANT_WORKERS"); do
    booted=$(grep -m1 " $machine: Machine booted and ready" "$LOG" | cut -d' ' -f1)
    provisioned=$(grep -m1 "kubelab provision ($machine): done" "$LOG" | cut -d' ' -f1)
    times+=("$(printf '  %-38s booted %s, provisioned %s' "$machine" "${booted:--}" \
      "${provisioned:--}")")
  done
}

teardown() {
  local status=$?
  rm -f "$SSH_CONFIG"
  if [ "${KUBELAB_VAGRANT_KEEP:-}" = 1 ]; then
    log "KUBELAB_VAGRANT_KEEP=1: the VMs stay; \`$KUBELAB vagrant down\` removes them"
  else
    log "teardown"
    "$KUBELAB" vagrant down 2>&1 | stamped || status=1
    step_done "teardown (kubelab vagrant down)"
  fi
  vm_times
  log "summary (exit $status):"
  printf '  %s\n' "${times[@]}" | tee -a "$LOG"
  exit "$status"
}
trap teardown EXIT

log "the lab's images (log: $LOG)"
"$KUBELAB" images build 2>&1 | stamped || fail "kubelab images build"
step_done "images in the host's cache"
log "up: control plane and $KUBELAB_VAGRANT_WORKERS workers"
log "vagrant up from $(date -u +%T)"
"$KUBELAB" vagrant up 2>&1 | stamped || fail "kubelab vagrant up"
step_done "vagrant up (every VM up and provisioned)"
"$KUBELAB" vagrant run vagrant ssh-config >"$SSH_CONFIG"

until_ok "$READY_TIMEOUT" all_ready || fail "$(ready_nodes) Ready nodes after ${READY_TIMEOUT}s"
kubectl get nodes -o wide | stamped
step_done "cluster Ready ($((KUBELAB_VAGRANT_WORKERS + 1)) nodes)"

kubectl apply -f /vagrant/vagrant/check/web.yaml | stamped || fail "kubectl apply"
on_controlplane kubectl rollout status deployment/web --timeout="${ROLLOUT_TIMEOUT}s" | stamped ||
  fail "the web Deployment did not roll out"
on_controlplane kubectl wait --for=condition=Ready pod/probe --timeout="${ROLLOUT_TIMEOUT}s" | stamped ||
  fail "the probe pod is not Ready"
kubectl get pods -o wide | stamped
web_nodes=$(kubectl get pods -l app=web -o 'jsonpath={.items[*].spec.nodeName}' |
  tr ' ' '\n' | sort -u | grep -vx controlplane | paste -sd ' ')
[ "$(wc -w <<<"$web_nodes")" -eq 2 ] || fail "web pods on '$web_nodes', not on two workers"
step_done "nginx (untagged) on $web_nodes, probe pod Ready"

vip=$(kubectl get service web -o 'jsonpath={.spec.clusterIP}')
node_port=$(kubectl get service web -o 'jsonpath={.spec.ports[0].nodePort}')
mapfile -t node_ips < <(kubectl get nodes \
  -o 'jsonpath={range .items[*]}{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}')
targets=("$vip" "${node_ips[@]/%/:$node_port}")
for target in "${targets[@]}"; do
  until_ok 120 nginx_answers "$target" || fail "no nginx page at $target from the control plane"
  log "nginx answers at $target from the control-plane VM"
done
step_done "Service VIP and NodePorts from the control-plane VM"
for target in "${targets[@]}"; do
  until_ok 120 nginx_answers --pod "$target" || fail "no nginx page at $target from a pod"
  log "nginx answers at $target from the probe pod (kubectl exec)"
done
step_done "Service VIP and NodePorts from a pod (kubectl exec)"

requests=0
for pod in $(kubectl get pods -l app=web -o 'jsonpath={.items[*].metadata.name}'); do
  count=$(kubectl logs "$pod" | grep -c '"GET / HTTP/1.1" 200' || true)
  log "kubectl logs $pod: $count requests logged"
  requests=$((requests + count))
done
[ "$requests" -ge "${#targets[@]}" ] || fail "kubectl logs showed $requests requests"
step_done "kubectl logs shows the requests"
log "every check passed"
