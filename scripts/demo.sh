#!/usr/bin/env bash
# xdpfw demo: two network namespaces joined by a veth pair; the server side
# loads examples/host.rules; real TCP, UDP and ping traffic is accepted or
# dropped as the rules say; counters show it. Everything is removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
XDPFW=${XDPFW:-$PWD/bin/xdpfw}
SRV=xdpfw-demo-srv CLI=xdpfw-demo-cli
BPF=/run/xdpfw-demo/bpf
export XDPFW_PIN_DIR=$BPF/xdpfw XDPFW_STATE_DIR=/run/xdpfw-demo/state

say()  { printf '\n\033[1m== %s\033[0m\n' "$*"; }
srv()  { ip netns exec $SRV "$@"; }
cli()  { ip netns exec $CLI "$@"; }
try()  { # try DESCRIPTION EXPECT(ok|blocked) COMMAND...
	local what=$1 want=$2; shift 2
	if "$@" >/dev/null 2>&1; then got=ok; else got=blocked; fi
	printf '  %-44s %-8s %s\n' "$what" "$got" "$([ $got = $want ] && echo '(as the rules say)' || echo "(EXPECTED $want!)")"
	[ $got = $want ] || failed=1
}
cleanup() {
	set +e
	srv "$XDPFW" detach --all >/dev/null 2>&1
	ip netns pids $SRV 2>/dev/null | xargs -r kill 2>/dev/null
	ip netns del $SRV 2>/dev/null; ip netns del $CLI 2>/dev/null
	umount $BPF 2>/dev/null; rm -rf /run/xdpfw-demo
}
trap cleanup EXIT
cleanup; failed=0

say "topology: $CLI (10.200.0.2, fd00:200::2) <-veth-> $SRV (10.200.0.1, fd00:200::1)"
ip netns add $SRV; ip netns add $CLI
ip link add veth-srv netns $SRV type veth peer name veth-cli netns $CLI
srv ip addr add 10.200.0.1/24 dev veth-srv; srv ip addr add fd00:200::1/64 dev veth-srv nodad
cli ip addr add 10.200.0.2/24 dev veth-cli; cli ip addr add fd00:200::2/64 dev veth-cli nodad
for ns in $SRV $CLI; do ip -n $ns link set lo up; done
srv ip link set veth-srv up; cli ip link set veth-cli up
# a bpffs the CLI can pin in from inside 'ip netns exec' (which remounts /sys)
mkdir -p $BPF && mount -t bpf bpf $BPF

# servers: ssh-like on 22, web on 80, an unlisted service on 8080; the
# client runs one on 9000 for the server to connect out to
for port in 22 80 8080; do
	srv nc -4 -lk -p $port >/dev/null 2>&1 &
	srv nc -6 -lk -p $port >/dev/null 2>&1 &
done
cli nc -4 -lk -p 9000 >/dev/null 2>&1 &
sleep 0.3

say "without a firewall everything is reachable"
try "tcp 10.200.0.1:8080" ok cli nc -z -w 2 10.200.0.1 8080

say "xdpfw load -i veth-srv examples/host.rules"
cat examples/host.rules | grep -v '^#' | grep -v '^$' | sed 's/^/  /'
srv "$XDPFW" load -i veth-srv examples/host.rules

say "traffic from the client"
try "tcp 10.200.0.1:22 (ssh)" ok cli nc -z -w 2 10.200.0.1 22
try "tcp 10.200.0.1:80 (web, from 10.200.0.0/24)" ok cli nc -z -w 2 10.200.0.1 80
try "tcp 10.200.0.1:8080 (not allowed)" blocked cli nc -z -w 2 10.200.0.1 8080
try "tcp [fd00:200::1]:22 (ssh over IPv6)" ok cli nc -6 -z -w 2 fd00:200::1 22
try "tcp [fd00:200::1]:8080 (not allowed)" blocked cli nc -6 -z -w 2 fd00:200::1 8080
try "ping 10.200.0.1" ok cli ping -c 2 -i 0.2 -W 1 10.200.0.1
try "ping fd00:200::1" ok cli ping -6 -c 2 -i 0.2 -W 1 fd00:200::1
try "udp 10.200.0.1:53 (sent; see counters)" ok cli sh -c 'echo q | nc -u -w 1 10.200.0.1 53'

say "traffic the server starts: its replies come back (conntrack: ESTABLISHED)"
try "server -> tcp 10.200.0.2:9000" ok srv nc -z -w 2 10.200.0.2 9000
try "server -> ping 10.200.0.2" ok srv ping -c 2 -i 0.2 -W 1 10.200.0.2

say "xdpfw conntrack list / stats"
srv "$XDPFW" conntrack list
srv "$XDPFW" conntrack stats

say "xdpfw list: per-rule counters"
srv "$XDPFW" list

say "xdpfw trace: what would the loaded rules do?"
srv "$XDPFW" trace -p tcp --src 198.51.100.9 --dst 10.200.0.1 --dport 22
srv "$XDPFW" trace -p tcp --src 10.200.0.2 --dst 10.200.0.1 --dport 8080
srv "$XDPFW" trace -p tcp --src 10.200.0.2 --dst 10.200.0.1 --dport 8080 --tcp-flags ACK

say "xdpfw stats / top: every counter, and live rates"
srv "$XDPFW" stats
srv "$XDPFW" top --once -n 5

say "logging: a LOG rule (non-terminating, rate limited in the kernel) and xdpfw log"
srv "$XDPFW" add --position 3 INPUT -p tcp --dport 8080 -j LOG --log-prefix "to-8080: "
try "tcp 10.200.0.1:8080 (logged, then dropped by the policy)" blocked cli nc -z -w 2 10.200.0.1 8080
srv "$XDPFW" log
srv "$XDPFW" delete INPUT 3

say "xdpfw add INPUT -p tcp --dport 8080 -j ACCEPT   (live, atomic)"
srv "$XDPFW" add INPUT -p tcp --dport 8080 -j ACCEPT
try "tcp 10.200.0.1:8080 (now allowed)" ok cli nc -z -w 2 10.200.0.1 8080

say "named sets: a blocklist filled at runtime (map updates only, no reload)"
srv "$XDPFW" set create blocklist hash:net
srv "$XDPFW" add --position 1 INPUT -m set --match-set blocklist src -j DROP
srv "$XDPFW" set add blocklist 10.200.0.2 203.0.113.0/24
try "tcp 10.200.0.1:22 (client in the blocklist)" blocked cli nc -z -w 2 10.200.0.1 22
srv "$XDPFW" set del blocklist 10.200.0.2
try "tcp 10.200.0.1:22 (client removed from it)" ok cli nc -z -w 2 10.200.0.1 22
srv "$XDPFW" set list

say "xdpfw status"
srv "$XDPFW" status

say "xdpfw detach -i veth-srv: connectivity comes back as it was"
srv "$XDPFW" detach -i veth-srv
try "tcp 10.200.0.1:8080" ok cli nc -z -w 2 10.200.0.1 8080

if [ $failed = 0 ]; then say "demo done: every packet got the verdict the rules give"; else say "demo FAILED"; exit 1; fi
