#!/usr/bin/env bash
# The dal ui browser tests drive Debian's chromium through its chromium-driver (Selenium is pointed at
# /usr/bin/chromedriver, so Selenium Manager never downloads a browser). Install both when missing.
set -u
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-browser: no apt-get here; install chromium and its chromedriver for the dal ui browser tests"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "ensure-browser: run as root (or with sudo): apt-get install -y chromium chromium-driver"
    exit 0
  fi
fi
echo "installing chromium and chromium-driver (apt)"
$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
exit 0
