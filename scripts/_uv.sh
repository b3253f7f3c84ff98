# Sourced by scripts/check and scripts/demo: make `uv` available, installing it with pip when missing.
# pip may put the uv binary outside PATH (~/.local/bin), so fall back to running it as `python3 -m uv`.
if ! command -v uv >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check "uv>=0.5" 2>/dev/null \
    || python3 -m pip install --quiet --disable-pip-version-check --user "uv>=0.5"
  export PATH="$HOME/.local/bin:$PATH"
  command -v uv >/dev/null 2>&1 || uv() { python3 -m uv "$@"; }
fi
