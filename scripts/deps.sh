#!/usr/bin/env bash
# Installs what xdpfw needs to build and test, when missing: Debian/Ubuntu
# packages (clang, llvm, libbpf-dev, bpftool, iproute2, ...) and a Go
# toolchain as go.mod asks (fetched through the Go module proxy).
set -euo pipefail

need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
pkg_missing() { ! dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

for p in clang llvm libbpf-dev iproute2 iptables nftables tcpdump ethtool iputils-ping netcat-openbsd linux-libc-dev make git ca-certificates curl unzip; do
	pkg_missing "$p" && need+=("$p")
done
# bpftool is its own package on Debian 12+, part of linux-tools on Ubuntu.
if ! have_cmd bpftool; then
	if apt-cache show bpftool >/dev/null 2>&1; then need+=(bpftool); else need+=("linux-tools-$(uname -r)" linux-tools-common); fi
fi
if ((${#need[@]})); then
	echo "deps: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Go: the version go.mod names (the 'go' line), unless a new enough one is here.
want=$(awk '/^go /{print $2}' "$(dirname "$0")/../go.mod")
ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }
if have_cmd go && ver_ge "$(go env GOVERSION | sed 's/^go//')" "$want"; then
	exit 0
fi
arch=$(dpkg --print-architecture)
dest=/usr/local/go-xdpfw
if [ ! -x "$dest/bin/go" ]; then
	echo "deps: fetching Go $want through the Go module proxy"
	tmp=$(mktemp -d)
	curl -fsSL -o "$tmp/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go${want}.linux-${arch}.zip"
	unzip -q "$tmp/go.zip" -d "$tmp"
	rm -rf "$dest"
	mv "$tmp/golang.org/toolchain@v0.0.1-go${want}.linux-${arch}" "$dest"
	chmod -R a+rX "$dest"; chmod a+x "$dest"/bin/* "$dest"/pkg/tool/*/*
	rm -rf "$tmp"
fi
ln -sf "$dest/bin/go" /usr/local/bin/go
ln -sf "$dest/bin/gofmt" /usr/local/bin/gofmt
echo "deps: go $(go env GOVERSION)"
