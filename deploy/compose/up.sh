#!/usr/bin/env bash
# Starts the fleet of docker-compose.yml on this machine and waits until the hub answers:
#
#   deploy/compose/up.sh          # then: export KUBECONFIG=deploy/compose/.fleet/hub.kubeconfig
#   deploy/compose/down.sh        # removes it (containers, networks, volumes)
#
# It builds the image (deploy/image/build.sh) unless GPUSTACK_IMAGE names one that exists,
# writes each cluster's node as a fixture host tree (the tests' `fleet-hosts`, with the NVML
# stand-in; cargo builds both) unless $GPUSTACK_FLEET_DIR/hosts has them, issues each gateway a
# CA and serving certificate (openssl) naming its service, starts the clusters, writes the
# hub's upstreams file from the kubeconfigs they wrote, publishes each node's Node (what the
# kubelet would write; its device-manager serve detects the cards and writes its Devices; no
# GPU is needed), and starts the agents and the hub. Needs docker, docker-compose, kubectl,
# openssl, cargo.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GPUSTACK_FLEET_DIR=${GPUSTACK_FLEET_DIR:-$here/.fleet}
export GPUSTACK_IMAGE=${GPUSTACK_IMAGE:-gpustack/gpustack-operator:compose}
project=${GPUSTACK_FLEET_PROJECT:-gpustack-fleet}
compose() { docker-compose -f "$here/docker-compose.yml" -p "$project" "$@"; }
run=$GPUSTACK_FLEET_DIR
mkdir -p "$run/config"
chmod 755 "$run" "$run/config"

if ! docker image inspect "$GPUSTACK_IMAGE" >/dev/null 2>&1; then
    "$here/../image/build.sh" --tag "$GPUSTACK_IMAGE" ${GPUSTACK_BINARY:+--binary "$GPUSTACK_BINARY"} >/dev/null
fi

# Each cluster's node: its host tree, mounted by its device-manager serve, and its Node.
if [ ! -f "$run/hosts/north/node.json" ]; then
    root=$(cd "$here/../.." && pwd)
    (cd "$root" && cargo build --quiet -p gpustack-fake-nvml -p gpustack-tests --bin fleet-hosts)
    built=${CARGO_TARGET_DIR:-$root/target}/debug
    GPUSTACK_FAKE_NVML_LIB=$built/libgpustack_fake_nvml.so "$built/fleet-hosts" "$run/hosts"
fi

# A CA and a serving pair for $1 naming $2 (openssl's subjectAltName syntax); readable by the
# image's user (a demo: the keys are the containers').
issue() {
    local dir=$run/certs/$1
    [ -f "$dir/tls.crt" ] && return 0
    mkdir -p "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
        -subj "/CN=$1-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$2" >"$dir/ext"
    openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
        -days 3650 -extfile "$dir/ext" -out "$dir/tls.crt" 2>/dev/null
    rm -f "$dir/tls.csr" "$dir/ext" "$dir/ca.key"
    chmod 755 "$dir"; chmod 644 "$dir"/*
}
# Docker picks the networks' subnets and the containers' addresses: each certificate names the
# service, which is how the hub reaches it (Docker's DNS on their shared network).
# The five at once (openssl's key generation is most of the CPU up.sh itself takes).
pids=()
for c in hub east west north; do
    issue "$c" "DNS:$c-api,DNS:localhost,IP:127.0.0.1" & pids+=($!)
done
issue mirror "DNS:hub-mirror,DNS:localhost,IP:127.0.0.1" & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done

# A kubeconfig with everything inline: $1 server, $2 the name its certificate is verified
# as, $3 CA file, $4 token.
kubeconfig() {
    printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n    tls-server-name: %s\n    certificate-authority-data: %s\nusers:\n- name: u\n  user:\n    token: %s\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n' \
        "$1" "$2" "$(base64 -w0 <"$3")" "$4"
}
# The container of service $1, by compose's labels: the docker CLI answers at once, where each
# `docker-compose ps` starts a Python interpreter (10 to 20 s apiece on a loaded machine, seven
# of them were most of up.sh's time).
container_of() {
    docker ps -q --filter "label=com.docker.compose.project=$project" \
        --filter "label=com.docker.compose.service=$1"
}
# The address Docker gave service $1 (on its only network).
address_of() {
    docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(container_of "$1")"
}
# The admin token of the kubeconfig cluster $1's gateway wrote, once it is there.
token_of() {
    local id; id=$(container_of "$1-api")
    for _ in $(seq 120); do
        if docker cp "$id:/var/lib/gpustack/$1.kubeconfig" "$run/config/.$1.written" 2>/dev/null; then
            sed -n 's/^ *token: *//p' "$run/config/.$1.written" | head -1; rm -f "$run/config/.$1.written"
            return 0
        fi
        sleep 0.5
    done
    echo "error: $1-api wrote no kubeconfig; docker-compose logs $1-api" >&2; exit 1
}

# Each cluster's Node as its kubelet would write it (what its device-manager serve looks for).
node() {
    local k=(kubectl --kubeconfig "$run/$1.kubeconfig" --request-timeout=5s)
    for _ in $(seq 120); do
        "${k[@]}" apply --server-side --field-manager=kubelet-stand-in -f "$run/hosts/$1/node.json" >/dev/null 2>&1 && break
        sleep 0.5
    done
    "${k[@]}" patch -f "$run/hosts/$1/node.json" --subresource=status --type=merge --patch-file "$run/hosts/$1/node-status.json" >/dev/null
}

compose up -d east-api west-api north-api hub-api east-worker west-worker north-worker
: >"$run/config/upstreams.yaml"
pids=()
for c in east west north; do
    t=$(token_of "$c")
    # For the hub, by the service's name inside their network; for this machine, at the
    # address Docker gave it (the network's bridge reaches it).
    kubeconfig "https://$c-api:6443" "$c-api" "$run/certs/$c/ca.crt" "$t" >"$run/config/$c.kubeconfig"
    kubeconfig "https://$(address_of "$c-api"):6443" "$c-api" "$run/certs/$c/ca.crt" "$t" >"$run/$c.kubeconfig"
    printf -- '- name: %s\n  kubeconfig: %s.kubeconfig\n' "$c" "$c" >>"$run/config/upstreams.yaml"
    # Its Node while the next cluster's token is read.
    node "$c" & pids+=($!)
done
chmod 644 "$run/config"/*
kubeconfig "https://127.0.0.1:${GPUSTACK_HUB_PORT:-6443}" hub-api "$run/certs/hub/ca.crt" "$(token_of hub)" >"$run/hub.kubeconfig"
for p in "${pids[@]}"; do wait "$p"; done

# The hub and the node agents together: one more docker-compose run (each costs seconds). The
# clusters' workers have been installing their kinds meanwhile, so the mirror's first look
# finds them served and waits out no retry.
compose up -d

export KUBECONFIG=$run/hub.kubeconfig
for _ in $(seq 120); do
    ready=$({ kubectl get clusters.fleet.gpustack.ai --no-headers 2>/dev/null || true; } | awk '$2=="Ready"' | wc -l)
    [ "$ready" -eq 3 ] && break
    sleep 0.5
done
kubectl get clusters
echo "the fleet is up; try:"
echo "  export KUBECONFIG=$run/hub.kubeconfig"
echo "  kubectl get clusters; kubectl get devices.fleet.gpustack.ai; kubectl get instancetypes.fleet.gpustack.ai"
