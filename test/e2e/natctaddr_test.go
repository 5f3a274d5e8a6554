package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// natCTAddrRules: a port forward and a MASQUERADE; the filter counts
// each connection's packets by the conntrack address tests (rules
// without a target) and accepts the port forward by its reply source.
// refused: the two tests xdpfw's NAT cannot answer with this nat table
// (--ctorigdst of a DNATed connection, --ctrepldst of a masqueraded
// one), as the first FORWARD rules, or none.
func natCTAddrRules(wan, lan, server, peer string, refused bool) string {
	const ct = "-m conntrack --ctstate NEW,ESTABLISHED"
	lines := []string{
		"*nat",
		":PREROUTING ACCEPT [0:0]",
		":INPUT ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":POSTROUTING ACCEPT [0:0]",
		"-A PREROUTING -d " + wan + "/32 -p udp -m udp --dport 9090 -j DNAT --to-destination " + server + ":8080",
		"-A POSTROUTING -s " + lan + " -o rb -j MASQUERADE",
		"COMMIT",
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
	}
	if refused {
		lines = append(lines,
			"-A FORWARD "+ct+" --ctorigdst "+wan,
			"-A FORWARD "+ct+" --ctrepldst "+wan)
	}
	return strings.Join(append(lines,
		"-A FORWARD "+ct+" --ctorigsrc "+peer,
		"-A FORWARD "+ct+" --ctreplsrc "+server,
		"-A FORWARD "+ct+" --ctorigsrc "+lan,
		"-A FORWARD "+ct+" --ctreplsrc "+peer,
		"-A FORWARD "+ct+" --ctdir ORIGINAL ! --ctorigsrc "+lan,
		"-A FORWARD "+ct+" --ctdir REPLY --ctreplsrc "+server,
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -m conntrack --ctstate NEW --ctreplsrc "+server+" -j ACCEPT",
		"-A FORWARD -i ra -o rb -j ACCEPT",
		"COMMIT",
	), "\n") + "\n"
}

// TestNATCtAddrXdpfw: -m conntrack's address tests under --nat xdpfw
// mean the kernel's conntrack tuples, checked against the kernel's
// iptables on the same namespaces first: a port forward (b to the
// router's WAN address, DNATed to a's server) and a masqueraded
// connection (a to b), two UDP exchanges each. The kernel counts
// --ctorigdst WAN for the port forward (its original destination, which
// no packet FORWARD sees carries) and --ctrepldst WAN for the
// masqueraded one (its MASQUERADE address): xdpfw refuses both at their
// rule, naming the nat rule (load, add, apply and apply --check against
// the nat table in force), rather than judge them on the packet's
// addresses (before: loaded, and never matched). Without them, every
// other FORWARD rule (--ctorigsrc, --ctreplsrc, --ctrepldst where nothing
// translates it, --ctdir REPLY) counts what iptables' counts.
func TestNATCtAddrXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x := natRouter(t)
	servePeer(t, x.a, 8080)
	servePeer(t, x.b, 8080)
	wan, server, peer, lan := x.lb.srv4, x.la.cli4, x.lb.cli4, "10.200.1.0/24"
	flows := func(what string) {
		t.Helper()
		for _, to := range []struct {
			from *testutil.NetNS
			addr string
		}{{x.b, hostPort(wan, 9090)}, {x.a, hostPort(peer, 8080)}} {
			if err := udpRounds(t, to.from, to.addr, 2); err != nil {
				t.Errorf("%s: UDP from %s to %s: %v", what, to.from, to.addr, err)
			}
		}
	}

	full := natCTAddrRules(wan, lan, server, peer, true)
	var want []uint64
	iptablesRestoreText(t, x.r, full)
	flows("iptables")
	want = iptablesCounts(t, x.r, "FORWARD")
	if len(want) != 11 || want[0] == 0 || want[1] == 0 || want[2] == 0 || want[3] == 0 {
		t.Fatalf("iptables counted FORWARD %v; want the --ctorigdst and --ctrepldst of the router's address and the port forward's rules to count", want)
	}
	iptablesRestoreText(t, x.r, "")
	kernelNAT(t, x.r, "-F")

	f := newFW(t, x.r)
	r := f.run("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "nat.rules", full))
	for _, s := range []string{"nat.rules:13:1: --ctorigdst with --nat xdpfw: not supported", "nat.rules:6:1: -j DNAT)", "--nat kernel"} {
		if r.code == 0 || !strings.Contains(r.stderr, s) {
			t.Errorf("load of --ctorigdst under a DNAT: exit %d, %q; want it refused: %q", r.code, r.stderr, s)
		}
	}
	text := natCTAddrRules(wan, lan, server, peer, false)
	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "nat.rules", text))
	r = f.run("add", "FORWARD", "-m", "conntrack", "--ctstate", "NEW,ESTABLISHED", "--ctrepldst", wan)
	if r.code == 0 || !strings.Contains(r.stderr, "--ctrepldst with --nat xdpfw: not supported") || !strings.Contains(r.stderr, "-j MASQUERADE") {
		t.Errorf("add of --ctrepldst under a MASQUERADE: exit %d, %q; want it refused", r.code, r.stderr)
	}
	for _, args := range [][]string{{"apply", "--check"}, {"apply"}} { // the nat table in force, the same file
		r = f.run(append(args, "--ipv4-file", writeRules(t, "nat.rules", full))...)
		if r.code == 0 || !strings.Contains(r.stderr, "--ctorigdst with --nat xdpfw: not supported") {
			t.Errorf("%s of --ctorigdst under the DNAT in force: exit %d, %q; want it refused", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	flows("xdpfw")
	var got []uint64
	for _, r := range f.list().Rules {
		if r.Chain == "FORWARD" {
			got = append(got, r.Counters.Packets)
		}
	}
	if !slices.Equal(got, want[2:]) {
		t.Errorf("xdpfw: FORWARD counted %v; iptables %v (without its first two rules)", got, want[2:])
	}
}
