#!/usr/bin/env bash
# Removes the fleet up.sh started: its containers, networks and volumes (the image stays).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GPUSTACK_FLEET_DIR=${GPUSTACK_FLEET_DIR:-$here/.fleet}
docker-compose -f "$here/docker-compose.yml" -p "${GPUSTACK_FLEET_PROJECT:-gpustack-fleet}" down -v
rm -rf "$GPUSTACK_FLEET_DIR"
