#!/usr/bin/env bash
# Installs what xdpfw needs to build and test, when missing: Debian/Ubuntu
# packages (clang, llvm, libbpf-dev, bpftool, iproute2, ...) and a Go
# toolchain as go.mod asks (fetched through the Go module proxy that GOPROXY
# names, as the go command would: `go env GOPROXY` when an older go is here,
# else $GOPROXY, else proxy.golang.org).
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
# goproxy prints the proxy the go command would ask first: the first entry of
# the GOPROXY list (entries separated by ',' or '|') that is neither "direct"
# nor "off". It fails when the list reaches "off" or holds no proxy: then the
# go command would not download a toolchain either.
goproxy() {
	local list ent
	if have_cmd go; then list=$(go env GOPROXY); else list=${GOPROXY-}; fi
	if [ -z "$list" ]; then
		echo https://proxy.golang.org
		return
	fi
	for ent in $(printf '%s' "$list" | tr ',|' '  '); do
		case $ent in
		direct) ;;
		off)
			echo "deps: GOPROXY=$list forbids downloads (\"off\"): install Go $want by hand" >&2
			return 1
			;;
		*)
			echo "${ent%/}"
			return
			;;
		esac
	done
	echo "deps: GOPROXY=$list names no proxy (only \"direct\"): install Go $want by hand or name a proxy" >&2
	return 1
}
arch=$(dpkg --print-architecture)
dest=/usr/local/go-xdpfw
if [ ! -x "$dest/bin/go" ]; then
	proxy=$(goproxy)
	echo "deps: fetching Go $want through the Go module proxy $proxy"
	tmp=$(mktemp -d)
	curl -fsSL --netrc-optional -o "$tmp/go.zip" "$proxy/golang.org/toolchain/@v/v0.0.1-go${want}.linux-${arch}.zip"
	unzip -q "$tmp/go.zip" -d "$tmp"
	rm -rf "$dest"
	mv "$tmp/golang.org/toolchain@v0.0.1-go${want}.linux-${arch}" "$dest"
	chmod -R a+rX "$dest"; chmod a+x "$dest"/bin/* "$dest"/pkg/tool/*/*
	rm -rf "$tmp"
fi
ln -sf "$dest/bin/go" /usr/local/bin/go
ln -sf "$dest/bin/gofmt" /usr/local/bin/gofmt
echo "deps: go $(go env GOVERSION)"
