#!/usr/bin/env bash
# Make sure Debian's `chromium` is on PATH: the HTML timeline's test opens the page in it
# headless (tests/history/test_timeline_browser.py). `make test` runs this before pytest.
#   - chromium present: nothing to do
#   - absent, root, apt reachable: `apt-get install -y --no-install-recommends chromium`
#     (about 1 minute on a Debian 12 machine; ~110 MB of packages)
#   - absent, not root: say what to install and exit 0, so the rest of the suite still runs;
#     the browser test then skips with that reason.
set -uo pipefail

say() { printf 'chromium: %s\n' "$*" >&2; }

if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    say "not installed and not root: run 'sudo apt-get install -y --no-install-recommends chromium'"
    say "(the HTML timeline's browser test skips until then)"
    exit 0
fi
start=$(date +%s)
say "installing Debian's chromium (apt-get, no recommends)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends chromium >/dev/null; then
    # A fresh machine may have no package lists yet.
    apt-get update -qq && apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends chromium >/dev/null || {
        say "apt-get install chromium failed"
        exit 1
    }
fi
say "installed $(chromium --version 2>/dev/null) in $(($(date +%s) - start)) s"
