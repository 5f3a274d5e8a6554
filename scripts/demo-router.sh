#!/usr/bin/env bash
# xdpfw router demo (issue 16, point 7): a LAN namespace reaches a WAN
# namespace through a router namespace whose filter and NAT are xdpfw's
# (load --nat xdpfw, docs/nat.md), with MASQUERADE and a port forward
# (examples/router.rules): both translated in XDP, `xdpfw conntrack list`
# showing both translations. Everything is removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
XDPFW=${XDPFW:-$PWD/bin/xdpfw}
LAN=xdpfw-rdemo-lan RTR=xdpfw-rdemo-rtr WAN=xdpfw-rdemo-wan
BPF=/run/xdpfw-rdemo/bpf
export XDPFW_PIN_DIR=$BPF/xdpfw XDPFW_STATE_DIR=/run/xdpfw-rdemo/state

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
lan() { ip netns exec $LAN "$@"; }
rtr() { ip netns exec $RTR "$@"; }
wan() { ip netns exec $WAN "$@"; }
try() { # try DESCRIPTION EXPECT(ok|blocked) COMMAND...
	local what=$1 want=$2; shift 2
	if "$@" >/dev/null 2>&1; then got=ok; else got=blocked; fi
	printf '  %-52s %-8s %s\n' "$what" "$got" "$([ $got = $want ] && echo '(as the rules say)' || echo "(EXPECTED $want!)")"
	[ $got = $want ] || failed=1
}
cleanup() {
	set +e
	rtr "$XDPFW" detach --all >/dev/null 2>&1
	for ns in $LAN $RTR $WAN; do ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null; done
	for ns in $LAN $RTR $WAN; do ip netns del $ns 2>/dev/null; done
	umount $BPF 2>/dev/null; rm -rf /run/xdpfw-rdemo
}
trap cleanup EXIT
cleanup; failed=0

say "topology: $LAN (10.200.10.2) <-> lan0 [$RTR] wan0 <-> $WAN (10.200.20.2)"
for ns in $LAN $RTR $WAN; do ip netns add $ns; ip -n $ns link set lo up; done
ip link add lan0 netns $RTR type veth peer name eth0 netns $LAN
ip link add wan0 netns $RTR type veth peer name eth0 netns $WAN
rtr ip addr add 10.200.10.1/24 dev lan0; rtr ip addr add 10.200.20.1/24 dev wan0
lan ip addr add 10.200.10.2/24 dev eth0; wan ip addr add 10.200.20.2/24 dev eth0
for ns in $LAN $WAN; do ip -n $ns link set eth0 up; done
rtr ip link set lan0 up; rtr ip link set wan0 up
lan ip route add default via 10.200.10.1
# the WAN knows no route to the LAN: only the router's address answers
rtr sysctl -qw net.ipv4.ip_forward=1
mkdir -p $BPF && mount -t bpf bpf $BPF

# a web server in the LAN, one in the WAN, a UDP echo in the WAN
lan nc -4 -lk -p 80 >/dev/null 2>&1 &
wan nc -4 -lk -p 80 >/dev/null 2>&1 &
wan python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 53))
while True:
    d, a = s.recvfrom(2048); s.sendto(d, a)' >/dev/null 2>&1 &
sleep 0.3

say "examples/router.rules"
grep -v '^#' examples/router.rules | sed 's/^/  /'

say "the nat and filter tables to xdpfw (load --nat xdpfw)"
rtr "$XDPFW" load -i lan0 -i wan0 --nat xdpfw --ipv4-file examples/router.rules

say "traffic"
try "LAN -> WAN web (tcp 10.200.20.2:80), masqueraded" ok lan nc -z -w 2 10.200.20.2 80
try "LAN -> WAN ping" ok lan ping -c 2 -i 0.2 -W 1 10.200.20.2
try "LAN -> WAN udp 10.200.20.2:53 (echoed back)" ok sh -c "echo q | ip netns exec $LAN nc -u -w 1 10.200.20.2 53 | grep -q q"
try "WAN -> port forward (tcp 10.200.20.1:8080 -> LAN :80)" ok wan nc -z -w 2 10.200.20.1 8080
try "WAN -> router tcp 10.200.20.1:22 (not allowed)" blocked wan nc -z -w 2 10.200.20.1 22
try "WAN -> router ping (not allowed)" blocked wan ping -c 1 -W 1 10.200.20.1

say "xdpfw conntrack list: each connection as the filter sees it, and its translation"
echo "  [SNAT]: the reply tuple, to the router's WAN address; [DNAT]: orig-dst, the address the client sent to"
rtr "$XDPFW" conntrack list | tee /run/xdpfw-rdemo/ct
for kind in SNAT DNAT; do
	grep -q "\[$kind\]" /run/xdpfw-rdemo/ct || { echo "  no $kind translation listed"; failed=1; }
done

say "xdpfw list: per-rule counters"
rtr "$XDPFW" list

say "xdpfw status"
rtr "$XDPFW" status

if [ $failed = 0 ]; then say "router demo done: every connection got the verdict the rules give"; else say "router demo FAILED"; exit 1; fi
