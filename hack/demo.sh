#!/usr/bin/env bash
# The main job, end to end, on this machine: a local control plane built
# from source, the Once manager, and the sandbox payment/ticket tool; then
# the samples are applied with kubectl, each operation is committed, the
# tool's ledger shows exactly one effect per key, a re-apply adds none, and
# an edit that would rebind a key to new parameters is refused. Everything
# keeps running until Ctrl-C.
#
#   make demo            (builds what it needs, then runs this script)
#
# Environment:
#   ONCE_DEMO_DIR       state folder (default <repo>/.local/demo)
#   ONCE_SANDBOX_ADDR   where the sandbox tool listens (default 127.0.0.1:8090,
#                       the URL in config/samples; on another address the
#                       samples are applied with their URL changed to it)
#   ONCE_METRICS_ADDR   the manager's metrics endpoint (default 127.0.0.1:8080)
#
# Once running, it prints the exports that make the README's and the docs'
# commands work in another terminal: KUBECONFIG, PATH with the repository's
# bin/ (kubectl-once, once-mcp, mcp-call...) and the control plane's kubectl
# first, and SANDBOX_URL. test/e2e/docs_test.go runs every sh block of the
# docs on this script, with the exports it prints.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${ONCE_DEMO_DIR:-$root/.local/demo}
sandbox_addr=${ONCE_SANDBOX_ADDR:-127.0.0.1:8090}
metrics_addr=${ONCE_METRICS_ADDR:-127.0.0.1:8080}
mkdir -p "$dir"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() {
  echo "demo: error: $*" >&2
  exit 1
}

pids=()
cleanup() {
  trap - EXIT INT TERM
  say "Stopping"
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  ONCE_CONTROLPLANE_DIR="$dir/controlplane" "$root/hack/controlplane.sh" stop || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Every binary the docs use, so that no block meets a missing one.
for bin in manager manager-failpoints sandbox-tool kubectl-once once-mcp mcp-call; do
  [[ -x $root/bin/$bin ]] || die "bin/$bin is missing: run make demo, which builds it"
done
if (exec 3<>"/dev/tcp/${sandbox_addr%:*}/${sandbox_addr##*:}") 2>/dev/null; then
  die "$sandbox_addr is in use (another demo?); stop it or set ONCE_SANDBOX_ADDR to another address"
fi
sandbox_url=http://$sandbox_addr

say "Starting the local control plane (etcd, kube-apiserver and kube-controller-manager built from source)"
kubeconfig=$(ONCE_CONTROLPLANE_DIR="$dir/controlplane" "$root/hack/controlplane.sh" start)
assets=$("$root/hack/controlplane-binaries.sh")
kubectl() { KUBECONFIG="$kubeconfig" "$assets/kubectl" "$@"; }
# apply_samples FOLDER: kubectl apply -k FOLDER, with the sandbox's URL where
# the samples name the default one (the sed the docs use too). It applies
# again while the API server answers ServiceUnavailable ("Resource kind …
# not found"): the admission policies' view of a new CRD can lag the API
# server's own, after kubectl get already lists the kind. Applying again
# changes nothing that was made.
apply_samples() {
  local out
  for _ in $(seq 30); do
    if out=$(kubectl kustomize "$1" | sed "s|http://127.0.0.1:8090|$sandbox_url|" | kubectl apply -f - 2>&1); then
      echo "$out"
      return 0
    fi
    grep -q ServiceUnavailable <<<"$out" || break
    sleep 1
  done
  echo "$out" >&2
  return 1
}
kubectl version | sed 's/^/  /'
kubectl create namespace once-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null

say "Installing Once's admission policies: kubectl apply -k config/policy"
# They record who wrote each resolution and approval, as the API server
# saw them. The manager runs here as the control plane's admin, whom the
# policies admit.
kubectl apply -k "$root/config/policy" | sed 's/^/  /'

say "Starting the sandbox tool on $sandbox_addr (ledger: $dir/ledger.jsonl)"
rm -f "$dir/ledger.jsonl"
"$root/bin/sandbox-tool" --listen "$sandbox_addr" --ledger "$dir/ledger.jsonl" >"$dir/sandbox.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
  curl -fsS "$sandbox_url/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$sandbox_url/healthz" >/dev/null || die "the sandbox tool did not start; see $dir/sandbox.log"

say "Starting the Once manager (log: $dir/manager.log, metrics: http://$metrics_addr/metrics)"
# The sandbox tool listens on loopback, which the manager refuses to call
# unless allowed.
KUBECONFIG="$kubeconfig" "$root/bin/manager" --health-probe-bind-address=0 \
  --metrics-bind-address="$metrics_addr" --metrics-secure=false \
  --allow-egress-cidrs=127.0.0.0/8 >"$dir/manager.log" 2>&1 &
pids+=($!)

# The API server may serve a new CRD's kind a moment after the control plane
# reported it ready (ServiceUnavailable, "Resource kind … not found"): wait
# until it lists every kind the samples use.
for _ in $(seq 60); do
  kubectl get seo,sagas,tools,clustertools -A >/dev/null 2>&1 && break
  sleep 0.5
done
say "Applying the samples: kubectl apply -k config/samples"
apply_samples "$root/config/samples"

say "Waiting for the operations: kubectl wait --for=condition=Ready seo --all"
kubectl wait --for=condition=Ready seo --all --timeout=120s
kubectl get seo -o wide

say "Re-applying the same manifests, the GitOps way"
apply_samples "$root/config/samples"

say "The tool's ledger: one effect per key"
summary=$(curl -fsS "$sandbox_url/ledger/summary")
echo "  $summary"
effects=$(grep -o '"effects":[0-9]*' <<<"$summary" | cut -d: -f2)
duplicates=$(grep -o '"duplicates":[0-9]*' <<<"$summary" | cut -d: -f2)
[[ $effects == 2 && $duplicates == 0 ]] || die "expected 2 effects and no duplicate, got $effects and $duplicates"
echo "  charge-order-1001 -> $(kubectl get seo charge-order-1001 -o jsonpath='{.status.externalObjectID}'), ticket-disk-full -> $(kubectl get seo ticket-disk-full -o jsonpath='{.status.externalObjectID}'); $effects effects, $duplicates duplicates"

say "A change as a saga: kubectl apply -k config/samples/sagas"
apply_samples "$root/config/samples/sagas"
echo "  The ticket opens; the config change waits for a person's approval:"
kubectl wait --for=jsonpath='{.status.conditions[?(@.type=="Stalled")].reason}'=WaitingForApproval \
  saga/scale-checkout --timeout=120s >/dev/null
kubectl get saga scale-checkout -o wide

say "Approving the change, declaratively (a GitOps repository would add the same lines)"
kubectl patch saga scale-checkout --type=merge \
  -p '{"spec":{"approvals":[{"step":"config","by":"demo","reason":"change window open"}]}}'
kubectl wait --for=jsonpath='{.status.state}'=Committed saga/scale-checkout --timeout=120s
echo "  approved by $(kubectl get saga scale-checkout -o jsonpath='{.status.steps[1].approval.by} (authenticated as {.status.steps[1].approval.user})')"

say "A change that fails for good is compensated: its ticket is closed again"
# Another change, whose configuration the store refuses for good (the
# sandbox refuses a request with a "reject" field). The store's dry run
# refuses it when the step starts, after the ticket was opened.
kubectl apply -f - <<'SAGA'
apiVersion: effects.once.dev/v1alpha1
kind: Saga
metadata:
  name: scale-search
spec:
  idempotencyKey: change-2042
  inputs: {service: search, replicas: 90}
  steps:
  - name: ticket
    toolRef: {name: servicedesk}
    operation: ticket.open
    parametersFrom:
    - {name: title, expression: "'Scale ' + inputs.service"}
    compensation:
      operation: ticket.close
      parametersFrom:
      - {name: ticket, expression: steps.ticket.externalObjectID}
  - name: config
    toolRef: {name: configstore}
    operation: config.set
    parameters: {reject: replicas above the quota}
    parametersFrom:
    - {name: ticket, expression: steps.ticket.externalObjectID}
    compensation:
      operation: config.revert
      parametersFrom:
      - {name: change, expression: steps.config.externalObjectID}
SAGA
kubectl wait --for=jsonpath='{.status.state}'=Compensated saga/scale-search --timeout=120s
kubectl get saga -o wide
kubectl get seo -l effects.once.dev/saga

say "Re-applying the sagas: nothing runs again"
apply_samples "$root/config/samples/sagas"

say "The ledger again: every step and every compensation once"
summary=$(curl -fsS "$sandbox_url/ledger/summary")
echo "  $summary"
effects=$(grep -o '"effects":[0-9]*' <<<"$summary" | cut -d: -f2)
duplicates=$(grep -o '"duplicates":[0-9]*' <<<"$summary" | cut -d: -f2)
# 2 operations, 3 steps of scale-checkout, scale-search's ticket opened
# and closed again.
[[ $effects == 7 && $duplicates == 0 ]] || die "expected 7 effects and no duplicate, got $effects and $duplicates"

say "The same charge, as an AI agent makes it: a tools/call through the MCP gateway (once-mcp)"
# mcp-call is a minimal MCP client of the official Go SDK; it starts
# once-mcp over stdio, as an agent's host starts an MCP server, and acts as
# the kubeconfig's user. The agent sends its own idempotency key.
mcp() { KUBECONFIG="$kubeconfig" "$root/bin/mcp-call" --stdio "$root/bin/once-mcp --stdio --namespace default" "$@" 2>/dev/null; }
echo "  tools/list: $(mcp list | grep -o '"name": "[^"]*"' | cut -d'"' -f4 | tr '\n' ' ')"
call='{"amount": 4200, "currency": "eur", "customer": "cus_42", "idempotencyKey": "agent-order-1002"}'
# answer: the state, the external id and whether it was replayed.
answer() { grep -oE '^    "(state|externalObjectID|replayed)": [^,]*' | tr -d ' "' | tr '\n' ' '; }
first=$(mcp call payments__charge.create "$call")
echo "  tools/call payments__charge.create $call"
echo "    -> $(answer <<<"$first")"
echo "  the agent retries it (its answer was lost, say):"
again=$(mcp call payments__charge.create "$call")
echo "    -> $(answer <<<"$again")"
grep -q '"replayed": true' <<<"$again" || die "the retried call was not answered from the record: $again"
kubectl get seo -l once.dev/via=mcp
summary=$(curl -fsS "$sandbox_url/ledger/summary")
effects=$(grep -o '"effects":[0-9]*' <<<"$summary" | cut -d: -f2)
duplicates=$(grep -o '"duplicates":[0-9]*' <<<"$summary" | cut -d: -f2)
[[ $effects == 8 && $duplicates == 0 ]] || die "expected 8 effects and no duplicate, got $effects and $duplicates"
echo "  one more charge for the agent's key, however often it calls: $effects effects, $duplicates duplicates"

say "Binding the key to other parameters is refused by the API server"
if out=$(sed 's/amount: 4200/amount: 9900/' "$root/config/samples/effects_v1alpha1_sideeffectoperation.yaml" | kubectl apply -f - 2>&1); then
  die "an edited request was accepted: $out"
fi
echo "$out" | sed 's/^/  /'

say "Running. Try it yourself, in another terminal:"
# The exports, quoted for the shell: a user pastes them, and the docs test
# reads them from here.
printf '  export KUBECONFIG=%q\n' "$kubeconfig"
printf '  export PATH=%q:$PATH\n' "$root/bin:$assets"
printf '  export SANDBOX_URL=%q\n' "$sandbox_url"
printf '  cd %q\n' "$root"
cat <<EOF
  kubectl get seo,sagas,tools,clustertools,idempotencyrecords
  kubectl once review -A
  kubectl once why saga/scale-search
  curl -s \$SANDBOX_URL/ledger/summary
  curl -s http://$metrics_addr/metrics | grep ^once_
  mcp-call --stdio "once-mcp --stdio" list
Every sh block of README.md and docs/*.md runs there, from the repository's
root (docs/README.md).
Press Ctrl-C to stop everything.
EOF
wait "${pids[@]}"
