#!/bin/sh
# Install the Debian packages named as arguments that are not installed yet.
# As root (CI, containers) with apt-get: installs them quietly. Otherwise: says what to run.
missing=""
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "==> installing Debian packages:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
  echo "==> please install:$missing  (e.g. sudo apt-get install$missing)" >&2
  exit 1
fi
