#!/usr/bin/env bash
# Runs a persistent local Kubernetes control plane for the Once demo and the
# end-to-end tests: etcd, kube-apiserver v1.37.2 and kube-controller-manager
# (garbage collector and namespace controller only) on loopback, started by
# bin/controlplane (test/harness/cmd/controlplane, built on
# controller-runtime's envtest), with the CRDs of config/crd/bases installed.
#
#   hack/controlplane.sh start    build what is missing, start in the background,
#                                 wait until ready, print the kubeconfig path
#   hack/controlplane.sh stop     stop it and remove its state (safe to repeat)
#   hack/controlplane.sh status   print the state and the kubeconfig path; exit 0
#                                 running, 3 stopped, 1 unhealthy or still starting
#   hack/controlplane.sh env      print export lines: eval "$(hack/controlplane.sh env)"
#                                 sets KUBECONFIG and puts kubectl v1.37.2 first in PATH
#
# Environment:
#   ONCE_CONTROLPLANE_DIR            state folder (default <repo>/.local/controlplane);
#                                    one control plane per folder, each on its own free
#                                    ports, so several can run side by side
#   ONCE_CONTROLPLANE_START_TIMEOUT  seconds start waits for readiness (default 120)
#   ONCE_CONTROLPLANE_AUTHENTICATION_CONFIG
#                                    kube-apiserver's --authentication-config (a file:
#                                    the JWT issuers it trusts, docs/mcp.md)
#   ONCE_CONTROLPLANE_CONTROLLERS    kube-controller-manager's --controllers (default
#                                    garbage-collector-controller,namespace-controller);
#                                    set but empty: no kube-controller-manager, so owner
#                                    references are not acted on and a deleted namespace
#                                    stays Terminating
#
# The state folder holds kubeconfig (admin, mode 0600), controlplane.pid,
# controlplane.log, kube-controller-manager.log, and while running etcd/,
# certs/ and kube-controller-manager.kubeconfig.
#
# kube-controller-manager runs the garbage collector and the namespace
# controller only: owner references are acted on and a deleted namespace goes
# away once its objects are gone; pods are never scheduled.
set -euo pipefail

prog=hack/controlplane.sh
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"
}
info() { echo "$prog: $*" >&2; }
die() {
  echo "$prog: error: $*" >&2
  exit 1
}

dir=${ONCE_CONTROLPLANE_DIR:-$root/.local/controlplane}
[[ -n $dir ]] || die "ONCE_CONTROLPLANE_DIR is set but empty"
# Absolute and normalised, so that the folder can be recognised in the command
# lines of its processes.
dir=$(realpath -m -- "$dir")
[[ $dir != / ]] || die "refusing to use / as the state folder"

kubeconfig=$dir/kubeconfig
pidfile=$dir/controlplane.pid
logfile=$dir/controlplane.log
assetsfile=$dir/assets
start_timeout=${ONCE_CONTROLPLANE_START_TIMEOUT:-120}
[[ $start_timeout =~ ^[1-9][0-9]*$ ]] ||
  die "ONCE_CONTROLPLANE_START_TIMEOUT must be a number of seconds, not '$start_timeout'"
stop_timeout=40

# Our own kubectl calls ignore the user's kuberc preferences.
export KUBECTL_KUBERC=false

# The processes of this folder's control plane, recognised by how
# bin/controlplane starts them (--dir DIR, etcd --data-dir=DIR/etcd,
# kube-apiserver --cert-dir=DIR/certs, kube-controller-manager
# --kubeconfig=DIR/kube-controller-manager.kubeconfig) and by their executable
# name, so that neither another folder's control plane nor a shell that merely
# mentions the folder ever matches. etcd, kube-apiserver and
# kube-controller-manager run in process groups of their own, so killing the
# process group of bin/controlplane alone would leave them running if
# bin/controlplane itself was killed.
dir_re=$(printf '%s' "$dir" | sed 's/[][\\.*^$+?(){}|]/\\&/g')
own_re="--dir ${dir_re}( |\$)|--data-dir=${dir_re}/etcd( |\$)|--cert-dir=${dir_re}/certs( |\$)"
own_re+="|--kubeconfig=${dir_re}/kube-controller-manager\.kubeconfig( |\$)"
# own_pids [NAME]: their pids, only those of executable NAME if given.
own_pids() {
  local want=${1:-} pid comm
  for pid in $(pgrep -f -- "$own_re" || true); do
    [[ $pid != "$$" ]] || continue
    comm=$(ps -o comm= -p "$pid" 2>/dev/null) || continue
    case $comm in
      controlplane | etcd | kube-apiserver | kube-controller | setsid) ;;
      *) continue ;;
    esac
    if [[ -z $want || $comm == "$want" ]]; then
      echo "$pid"
    fi
  done
  return 0
}

read_pid() {
  local pid=""
  [[ -f $pidfile ]] && pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] && echo "$pid"
  return 0
}

# pid_alive PID: PID is a live bin/controlplane serving this folder.
pid_alive() {
  local pids
  [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null || return 1
  [[ $(ps -o comm= -p "$1" 2>/dev/null) == controlplane ]] || return 1
  pids=" $(own_pids | tr '\n' ' ') "
  [[ $pids == *" $1 "* ]]
}

bins_dir() {
  local bins=""
  [[ -f $assetsfile ]] && bins=$(<"$assetsfile")
  if [[ -z $bins || ! -x $bins/kubectl ]]; then
    bins=$("$root/hack/controlplane-binaries.sh") || die "hack/controlplane-binaries.sh failed"
  fi
  echo "$bins"
}

# api_ready BINS: the kubeconfig exists and kube-apiserver answers /readyz.
api_ready() {
  [[ -f $kubeconfig && -x $1/kubectl ]] || return 1
  [[ $("$1/kubectl" --kubeconfig "$kubeconfig" --request-timeout=5s get --raw /readyz 2>/dev/null) == ok ]]
}

# plane_state: running, unhealthy (process or leftovers present, API not
# ready: also the case while starting) or stopped.
plane_state() {
  local pid bins=""
  pid=$(read_pid)
  if pid_alive "$pid"; then
    [[ -f $assetsfile ]] && bins=$(<"$assetsfile")
    if [[ -n $bins ]] && api_ready "$bins"; then
      echo running
    else
      echo unhealthy
    fi
  elif [[ -n $(own_pids) ]]; then
    echo unhealthy
  else
    echo stopped
  fi
}

# lock: one start or stop at a time per folder. The background control plane
# must not inherit the descriptor (see 9>&- below).
lock() {
  (umask 077 && mkdir -p "$dir")
  exec 9>"$dir/.controlplane.sh.lock"
  if ! flock -n 9; then
    info "waiting for another $prog start/stop on $dir"
    flock 9
  fi
}

# show_log: this program's own messages and the last lines of the log.
show_log() {
  info "from $logfile:"
  grep -E '"logger":"controlplane"|^controlplane: ' "$logfile" | tail -n 8 >&2 || true
  echo "..." >&2
  tail -n 5 "$logfile" >&2 || true
}

remove_state() {
  rm -f "$kubeconfig" "$pidfile" "$assetsfile" "$dir"/.kubeconfig.tmp-* "$dir"/.controlplane.pid.tmp-*
  rm -f "$dir/kube-controller-manager.kubeconfig" "$dir"/.kube-controller-manager.kubeconfig.tmp-*
  rm -rf "$dir/etcd" "$dir/certs"
}

# wait_gone SECONDS [NAME]: wait until none of this folder's processes (of
# executable NAME if given) remain.
wait_gone() {
  local deadline=$((SECONDS + $1))
  while [[ -n $(own_pids "${2:-}") ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

do_stop() {
  local pid pids
  pid=$(read_pid)
  pids=$(own_pids | tr '\n' ' ')
  if [[ -z $pids ]]; then
    remove_state
    return 0
  fi
  if ! pid_alive "$pid"; then
    # The pid file is gone (state folder removed by hand?): find the process.
    pid=$(own_pids controlplane)
    pid=${pid%%$'\n'*}
  fi
  if pid_alive "$pid"; then
    info "stopping the control plane (pid $pid)"
    # bin/controlplane leads its own process group (setsid); on SIGTERM it
    # stops kube-controller-manager, kube-apiserver, then etcd, then removes
    # its state.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  else
    info "no live control plane process; stopping leftover processes: $pids"
    pid=""
    # kube-controller-manager, then kube-apiserver: without etcd its
    # shutdown hangs.
    # shellcheck disable=SC2086 # a list of pids
    kill -TERM $(own_pids kube-controller) 2>/dev/null || true
    # shellcheck disable=SC2086 # a list of pids
    kill -TERM $(own_pids kube-apiserver) 2>/dev/null || true
    wait_gone $((stop_timeout / 2)) kube-apiserver || true
    # shellcheck disable=SC2086 # a list of pids
    kill -TERM $(own_pids) 2>/dev/null || true
  fi
  if ! wait_gone "$stop_timeout"; then
    pids=$(own_pids | tr '\n' ' ')
    info "still running after ${stop_timeout}s, killing: $pids"
    if [[ -n $pid ]]; then
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    # shellcheck disable=SC2086 # a list of pids
    kill -KILL $pids 2>/dev/null || true
    wait_gone 10 || die "could not stop processes of $dir: $(own_pids | tr '\n' ' ')"
  fi
  remove_state
}

cmd_start() {
  local state pid bins b tmpbin launcher rc deadline args
  lock
  state=$(plane_state)
  case $state in
    running)
      info "already running for $dir (pid $(read_pid))"
      echo "$kubeconfig"
      return 0
      ;;
    unhealthy)
      info "found an unresponsive control plane or leftover processes for $dir; stopping them first"
      do_stop
      ;;
  esac

  bins=$("$root/hack/controlplane-binaries.sh") || die "hack/controlplane-binaries.sh failed"
  for b in etcd kube-apiserver kube-controller-manager kubectl; do
    [[ -x $bins/$b ]] || die "$bins/$b is missing (hack/controlplane-binaries.sh printed $bins)"
  done

  # Build to a temporary name and rename: another start (other folder) may be
  # running bin/controlplane or building it at the same time.
  mkdir -p "$root/bin"
  tmpbin=$root/bin/.controlplane.$$.tmp
  if ! (cd "$root" && go build -o "$tmpbin" ./test/harness/cmd/controlplane); then
    rm -f "$tmpbin"
    die "building test/harness/cmd/controlplane failed"
  fi
  mv -f "$tmpbin" "$root/bin/controlplane"

  remove_state
  printf '%s\n' "$bins" >"$assetsfile"
  : >"$logfile"
  info "starting a control plane in $dir (log: $logfile)"
  args=()
  if [[ -n ${ONCE_CONTROLPLANE_CONTROLLERS+set} ]]; then
    args=(--controllers "$ONCE_CONTROLPLANE_CONTROLLERS")
  fi
  if [[ -n ${ONCE_CONTROLPLANE_AUTHENTICATION_CONFIG:-} ]]; then
    args+=(--authentication-config "$(realpath -- "$ONCE_CONTROLPLANE_AUTHENTICATION_CONFIG")")
  fi
  setsid -w "$root/bin/controlplane" \
    --assets "$bins" \
    --crds "$root/config/crd/bases" \
    --dir "$dir" \
    --kubeconfig "$kubeconfig" \
    "${args[@]}" \
    </dev/null >>"$logfile" 2>&1 9>&- &
  launcher=$!

  deadline=$((SECONDS + start_timeout))
  until api_ready "$bins"; do
    if ! kill -0 "$launcher" 2>/dev/null; then
      rc=0
      wait "$launcher" || rc=$?
      info "the control plane exited during start-up (status $rc)"
      show_log
      do_stop
      exit 1
    fi
    if ((SECONDS >= deadline)); then
      info "not ready after ${start_timeout}s"
      show_log
      do_stop
      exit 1
    fi
    sleep 0.5
  done
  pid=$(read_pid)
  info "running (pid $pid); stop it with: $prog stop"
  echo "$kubeconfig"
}

cmd_stop() {
  local pids
  if [[ -d $dir ]]; then
    lock
  fi
  pids=$(own_pids)
  do_stop
  if [[ -n $pids ]]; then
    info "stopped ($dir)"
  else
    info "not running ($dir)"
  fi
}

cmd_status() {
  local state pid
  state=$(plane_state)
  pid=$(read_pid)
  case $state in
    running)
      echo "running (pid $pid, state folder $dir)"
      echo "kubeconfig: $kubeconfig"
      return 0
      ;;
    unhealthy)
      if pid_alive "$pid"; then
        echo "starting or unhealthy: pid $pid is up but the API server is not ready (log: $logfile)"
      else
        echo "unhealthy: processes of $dir without a live, recorded bin/controlplane:" \
          "$(own_pids | tr '\n' ' ')(run $prog stop)"
      fi
      echo "kubeconfig: $kubeconfig"
      return 1
      ;;
    *)
      echo "stopped (state folder $dir)"
      echo "kubeconfig: $kubeconfig"
      return 3
      ;;
  esac
}

cmd_env() {
  local bins
  bins=$(bins_dir)
  if [[ $(plane_state) != running ]]; then
    info "warning: no control plane is running for $dir (start it with: $prog start)"
  fi
  printf 'export KUBECONFIG=%q\n' "$kubeconfig"
  printf 'export PATH=%q:"$PATH"\n' "$bins"
}

case ${1:-} in
  start | stop | status | env)
    [[ $# -eq 1 ]] || die "'$1' takes no arguments (see $prog --help)"
    "cmd_$1"
    ;;
  -h | --help | help)
    usage
    ;;
  "")
    usage >&2
    exit 2
    ;;
  *)
    echo "$prog: unknown command '$1'" >&2
    usage >&2
    exit 2
    ;;
esac
