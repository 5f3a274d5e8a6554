package e2e

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// ufwLike is a host's filter table in the shape ufw writes (our own
// version; one file for iptables-restore and ip6tables-restore, -4 and -6
// marking the lines of one family): INPUT jumps through before/user/after chains, ICMP and
// conntrack first, a per-service chain reached by goto, an explicit
// RETURN, the rest left to the policy.
var ufwLike = []string{
	"*filter",
	":INPUT DROP [0:0]",
	":FORWARD DROP [0:0]",
	":OUTPUT ACCEPT [0:0]",
	":ufw-before-input - [0:0]",
	":ufw-user-input - [0:0]",
	":ufw-user-limit - [0:0]",
	":ufw-after-input - [0:0]",
	":ufw-skip-to-policy-input - [0:0]",
	":ufw-not-used - [0:0]",
	"-A INPUT -p tcp --dport 9001 -g ufw-user-limit",
	"-A INPUT -j ufw-before-input",
	"-A INPUT -j ufw-after-input",
	"-A ufw-before-input -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
	"-A ufw-before-input -m conntrack --ctstate INVALID -j DROP",
	"-4 -A ufw-before-input -p icmp --icmp-type echo-request -j ACCEPT",
	"-6 -A ufw-before-input -p ipv6-icmp -j ACCEPT",
	"-4 -A ufw-before-input -s 198.51.100.0/24 -j RETURN",
	"-A ufw-before-input -j ufw-user-input",
	"-A ufw-user-input -p tcp --dport 22 -j ACCEPT",
	"-4 -A ufw-user-input -s 10.200.0.0/24 -p tcp --dport 80 -j ACCEPT",
	"-A ufw-user-input -p tcp --dport 443 -g ufw-user-limit",
	"-4 -A ufw-user-limit -s 10.200.0.0/24 -j ACCEPT",
	"-6 -A ufw-user-limit -s fd00:200::/64 -j ACCEPT",
	"-A ufw-after-input -p tcp --dport 8080 -j ufw-skip-to-policy-input",
	"-A ufw-after-input -p tcp -j ACCEPT",
	"-A ufw-skip-to-policy-input -j DROP",
	"COMMIT",
}

// TestChainsUfwHost loads the ufw-like table (as an iptables-save file)
// on the server end of a veth pair and checks real TCP and ICMP traffic
// from the client, in both families: what the chains accept connects,
// what a RETURN sends back or a goto falls out of meets the later rules
// or the policy, as with iptables. list -S prints the chains as
// iptables -S, and apply reads that text back.
func TestChainsUfwHost(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	const blocked, other = "198.51.100.7", "10.201.0.2"
	for _, a := range []string{blocked, other} {
		ipOut(t, "-n", l.cli.Name, "addr", "add", a+"/32", "dev", l.cliIf)
	}
	ipOut(t, "-n", l.srv.Name, "route", "add", "198.51.100.0/24", "via", l.cli4)
	ipOut(t, "-n", l.srv.Name, "route", "add", "10.201.0.0/24", "via", l.cli4)
	serveTCP(t, l.srv, 22, 80, 443, 8080, 9000, 9001)

	file := writeRules(t, "ufw.rules", ufwLike...)
	f := newFW(t, l.srv)
	r := f.mustRun("load", "-i", l.srvIf, "--ipv4-file", file, "--ipv6-file", file)
	if !strings.Contains(r.stderr+r.stdout, "no built-in chain reaches chain ufw-not-used") {
		t.Errorf("load does not warn about the chain nothing reaches:\n%s", r)
	}
	p := func(local, addr string, port int, ok bool) tcpProbe {
		return tcpProbe{from: l.cli, local: local, addr: hostPort(addr, port), ok: ok}
	}
	checkTCP(t, "ufw-like",
		p("", l.srv4, 22, true),       // ufw-user-input
		p("", l.srv6, 22, true),       // both families
		p("", l.srv4, 80, true),       // from the local network
		p(other, l.srv4, 80, true),    // ufw-after-input: any tcp
		p("", l.srv6, 80, true),       // ufw-after-input
		p("", l.srv4, 443, true),      // goto ufw-user-limit, accepted there
		p(other, l.srv4, 443, true),   // falls out of ufw-user-limit: back to ufw-before-input (which -j'd ufw-user-input), then ufw-after-input
		p("", l.srv4, 9001, true),     // INPUT -g ufw-user-limit: accepted there
		p(other, l.srv4, 9001, false), // falls out of a chain INPUT went to: INPUT's policy, not ufw-after-input
		p("", l.srv4, 8080, false),    // ufw-skip-to-policy-input
		p("", l.srv4, 9000, true),     // ufw-after-input
		p(blocked, l.srv4, 22, true),  // RETURN from ufw-before-input, then ufw-after-input accepts tcp
		p(blocked, l.srv4, 8080, false),
	)
	checkPing(t, "ufw-like", l.cli, l.srv4, true)
	checkPing(t, "ufw-like", l.cli, l.srv6, true)
	// Jumps and gotos count the packets that reach and match them.
	list := f.list()
	for _, rule := range []string{"-A INPUT -4 -j ufw-before-input", "-A INPUT -6 -j ufw-before-input",
		"-A ufw-before-input -4 -j ufw-user-input", "-A ufw-user-input -4 -p tcp --dport 443 -g ufw-user-limit",
		"-A ufw-before-input -s 198.51.100.0/24 -j RETURN"} {
		if got := list.rule(t, rule).Counters.Packets; got < 1 {
			t.Errorf("%q counted %d packets, want at least 1:\n%s", rule, got, list.raw)
		}
	}

	// list -S: policies, the chains by name, the rules; apply reads it back.
	save := f.mustRun("list", "-S").stdout
	for _, want := range []string{"-P INPUT DROP\n", "-N ufw-after-input\n-N ufw-before-input\n-N ufw-not-used\n",
		"-A ufw-user-input -4 -p tcp --dport 443 -g ufw-user-limit\n", "-A INPUT -4 -j ufw-before-input\n"} {
		if !strings.Contains(save, want) {
			t.Errorf("list -S lacks %q:\n%s", want, save)
		}
	}
	again := writeRules(t, "again.rules", save)
	f.mustRun("apply", again)
	if got := f.mustRun("list", "-S").stdout; got != save {
		t.Errorf("apply of list -S changed the rules:\n%s\nthen\n%s", save, got)
	}
	// A chain still jumped to cannot be deleted; an empty one nothing uses can.
	if r := f.run("chain", "delete", "ufw-user-limit"); r.code == 0 || !strings.Contains(r.stderr, "still in use") {
		t.Errorf("chain delete of a chain in use: %s", r)
	}
	f.mustRun("chain", "delete", "ufw-not-used")
	// Edits inside a user chain: port 9000 is dropped once ufw-after-input says so.
	f.mustRun("insert", "ufw-after-input", "-p", "tcp", "--dport", "9000", "-j", "DROP")
	checkTCP(t, "after insert", p("", l.srv4, 9000, false), p("", l.srv4, 22, true))
	f.mustRun("delete", "ufw-after-input", "1")
	checkTCP(t, "after delete", p("", l.srv4, 9000, true))
}

// dockerLike is a Docker host's filter table in Docker's shape (our own
// version, the containers' bridge played by a veth to a namespace, and
// "-o docker0" written as the bridge's network, -d): FORWARD jumps to
// DOCKER-USER (a user block, then RETURN), the isolation stages (RETURN
// at every level), then DOCKER's published port.
var dockerLike = []string{
	"*filter",
	":INPUT ACCEPT [0:0]",
	":FORWARD DROP [0:0]",
	":OUTPUT ACCEPT [0:0]",
	":DOCKER - [0:0]",
	":DOCKER-ISOLATION-STAGE-1 - [0:0]",
	":DOCKER-ISOLATION-STAGE-2 - [0:0]",
	":DOCKER-USER - [0:0]",
	"-A FORWARD -j DOCKER-USER",
	"-A FORWARD -j DOCKER-ISOLATION-STAGE-1",
	"-A FORWARD -d 10.200.2.0/24 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
	"-A FORWARD -d 10.200.2.0/24 -j DOCKER",
	"-A FORWARD -i xr1 -j ACCEPT",
	"-A DOCKER -d 10.200.2.2/32 -p tcp -m tcp --dport 80 -j ACCEPT",
	"-A DOCKER-ISOLATION-STAGE-1 -i xr1 -j DOCKER-ISOLATION-STAGE-2",
	"-A DOCKER-ISOLATION-STAGE-1 -j RETURN",
	"-A DOCKER-ISOLATION-STAGE-2 -d 10.200.3.0/24 -j DROP",
	"-A DOCKER-ISOLATION-STAGE-2 -j RETURN",
	"-A DOCKER-USER -s 10.201.0.2/32 -j DROP",
	"-A DOCKER-USER -j RETURN",
	"COMMIT",
}

// TestChainsDockerRouter loads the Docker-like table on a router
// namespace between a client and a "container" namespace and checks real
// forwarded TCP: the published port connects (and its replies, from the
// container side, pass the isolation stages), another port meets the
// policy, the user's block in DOCKER-USER holds.
func TestChainsDockerRouter(t *testing.T) {
	testutil.RequireRoot(t)
	rtr, cli, srv := testutil.NewNetNS(t), testutil.NewNetNS(t), testutil.NewNetNS(t)
	up := newLink(t, rtr, "xr0", cli, "xc0", 1)
	down := newLink(t, rtr, "xr1", srv, "xs0", 2)
	if out, err := rtr.Exec(t.Context(), "sysctl", "-qw", "net.ipv4.conf.all.forwarding=1"); err != nil {
		t.Fatalf("forwarding: %v\n%s", err, out)
	}
	const user = "10.201.0.2"
	ipOut(t, "-n", cli.Name, "addr", "add", user+"/32", "dev", up.cliIf)
	ipOut(t, "-n", cli.Name, "route", "add", "10.200.2.0/24", "via", up.srv4)
	ipOut(t, "-n", rtr.Name, "route", "add", "10.201.0.0/24", "via", up.cli4)
	ipOut(t, "-n", srv.Name, "route", "add", "10.200.1.0/24", "via", down.srv4)
	ipOut(t, "-n", srv.Name, "route", "add", "10.201.0.0/24", "via", down.srv4)
	serveTCP(t, srv, 80, 81)
	p := func(local string, port int, ok bool) tcpProbe {
		return tcpProbe{from: cli, local: local, addr: hostPort(down.cli4, port), ok: ok}
	}
	checkTCP(t, "no firewall", p("", 80, true), p("", 81, true), p(user, 80, true))

	f := newFW(t, rtr)
	f.mustRun("load", "-i", "xr0", "-i", "xr1", "--ipv4-file", writeRules(t, "docker.rules", dockerLike...))
	checkTCP(t, "docker-like",
		p("", 80, true),    // DOCKER: the published port
		p("", 81, false),   // no rule: FORWARD's policy
		p(user, 80, false), // DOCKER-USER's block
	)
	if l := f.list(); len(l.chain("DOCKER-USER")) != 2 || len(l.chain("DOCKER")) != 1 {
		t.Errorf("list does not show the user chains' rules:\n%s", l.raw)
	}
}
