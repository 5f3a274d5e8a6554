package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestDetachRestores checks that detaching from the last interface removes
// xdpfw completely: traffic the policy dropped flows again, nothing stays
// pinned or recorded, and the interface has no XDP program.
func TestDetachRestores(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, 22)
	probes := func(ok bool) []tcpProbe {
		return []tcpProbe{
			{from: l.cli, addr: hostPort(l.srv4, 22), ok: ok},
			{from: l.cli, addr: hostPort(l.srv6, 22), ok: ok},
		}
	}
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "drop.rules", "-P INPUT DROP"))
	if prog := xdpProg(t, l.srv, l.srvIf); !strings.HasPrefix(prog, "xdp id ") {
		t.Fatalf("after load, ip -d link shows %q on %s, want a native XDP program", prog, l.srvIf)
	}
	checkTCP(t, "policy DROP", probes(false)...)
	checkPing(t, "policy DROP", l.cli, l.srv4, false)

	r := f.mustRun("detach", "-i", l.srvIf)
	if want := "detached from " + l.srvIf + "\nno interface left: xdpfw removed\n"; r.stdout != want {
		t.Errorf("detach output, want %q: %s", want, r)
	}
	// The policy dropped the client's IPv6 neighbour solicitations: a
	// resolution still failing from then would refuse the next connect
	// (EHOSTUNREACH) for a few seconds. Start the neighbour cache afresh.
	ipOut(t, "-n", l.cli.Name, "neigh", "flush", "dev", l.cliIf)
	checkTCP(t, "detached", probes(true)...)
	checkPing(t, "detached", l.cli, l.srv4, true)
	checkPing(t, "detached", l.cli, l.srv6, true)
	f.wantNothingLoaded(l.srvIf)
	if r := f.run("detach", "-i", l.srvIf); r.code != 1 || !strings.Contains(r.stderr, "not loaded") {
		t.Errorf("a second detach: want exit status 1 saying xdpfw is not loaded: %s", r)
	}
}

// TestMultipleInterfaces attaches to two interfaces of one server, each
// leading to its own client, with a rule that accepts ssh on one of them
// only, and checks traffic per interface, status, and that detaching one
// interface leaves the other filtered.
func TestMultipleInterfaces(t *testing.T) {
	testutil.RequireRoot(t)
	srv := testutil.NewNetNS(t)
	a := newLink(t, srv, "srv-a", testutil.NewNetNS(t), "cli-a", 1)
	b := newLink(t, srv, "srv-b", testutil.NewNetNS(t), "cli-b", 2)
	// b's client may also try a's address, through srv-b.
	ipOut(t, "-n", b.cli.Name, "route", "add", "10.200.1.0/24", "via", b.srv4)
	serveTCP(t, srv, 22, 8080)

	const rule = "-A INPUT -i srv-a -p tcp --dport 22 -j ACCEPT"
	f := newFW(t, srv)
	r := f.mustRun("load", "-i", "srv-a", "-i", "srv-b", writeRules(t, "a.rules", "-P INPUT DROP", rule))
	for _, i := range []string{"srv-a", "srv-b"} {
		if want := "attached to " + i + " (native mode)\n"; !strings.Contains(r.stdout, want) {
			t.Errorf("load output lacks %q: %s", want, r)
		}
	}
	checkTCP(t, "on both",
		tcpProbe{from: a.cli, addr: hostPort(a.srv4, 22), ok: true},
		tcpProbe{from: b.cli, addr: hostPort(b.srv4, 22), ok: false},
		tcpProbe{from: a.cli, addr: hostPort(a.srv4, 8080), ok: false},
		// the interface a packet arrives on counts, not the address it is for
		tcpProbe{from: b.cli, addr: hostPort(a.srv4, 22), ok: false})

	st := f.status()
	if len(st.Interfaces) != 2 {
		t.Errorf("status lists %d interfaces, want srv-a and srv-b:\n%s", len(st.Interfaces), st.raw)
	}
	for _, i := range []string{"srv-a", "srv-b"} {
		if got := st.Interfaces[i]; got.Mode != "native" || got.Index <= 0 {
			t.Errorf("status: interface %s is %+v, want mode native:\n%s", i, got, st.raw)
		}
		if prog, id := xdpProg(t, srv, i), st.attachedID(t, i); prog != fmt.Sprintf("xdp id %d", id) {
			t.Errorf("%s runs %q, status says program %d", i, prog, id)
		}
	}
	for _, c := range []struct {
		in      string
		verdict string
		num     int
	}{{"srv-a", "XDP_PASS", 1}, {"srv-b", "XDP_DROP", 0}} {
		tr, r := f.trace("--in", c.in, "-p", "tcp", "--src", "10.200.9.9", "--dst", a.srv4, "--dport", "22")
		if c.num == 0 {
			wantTrace(t, tr, r, c.verdict, 0, "")
		} else {
			wantTrace(t, tr, r, c.verdict, c.num, rule)
		}
	}
	if rc := f.list().rule(t, rule).Counters.Packets; rc < 1 {
		t.Errorf("rule %q counted %d packets, want the accepted SYN", rule, rc)
	}

	r = f.mustRun("detach", "-i", "srv-a")
	if r.stdout != "detached from srv-a\n" {
		t.Errorf("detach -i srv-a: want only %q: %s", "detached from srv-a\n", r)
	}
	st = f.status()
	if len(st.Interfaces) != 1 || st.Interfaces["srv-b"].Mode != "native" {
		t.Errorf("status after detaching srv-a, want srv-b only:\n%s", st.raw)
	}
	if prog := xdpProg(t, srv, "srv-a"); prog != "" {
		t.Errorf("srv-a still runs %q after detach", prog)
	}
	checkTCP(t, "srv-a detached",
		tcpProbe{from: a.cli, addr: hostPort(a.srv4, 22), ok: true},
		tcpProbe{from: a.cli, addr: hostPort(a.srv4, 8080), ok: true},
		tcpProbe{from: b.cli, addr: hostPort(b.srv4, 22), ok: false},
		tcpProbe{from: b.cli, addr: hostPort(b.srv4, 8080), ok: false})
}

// TestAttachModes loads in each attach mode on a fresh firewall and checks
// the mode reported by load, status and the kernel, and that the program
// filters in that mode; offload, which veth cannot do, must fail cleanly.
func TestAttachModes(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, 22, 8080)
	rules := writeRules(t, "ssh.rules", "-P INPUT DROP", "-A INPUT -p tcp --dport 22 -j ACCEPT")

	for _, c := range []struct{ mode, want, ipProg string }{
		{"native", "native", "xdp"},
		{"generic", "generic", "xdpgeneric"},
		{"auto", "native", "xdp"}, // veth does native XDP
	} {
		t.Run(c.mode, func(t *testing.T) {
			f := newFW(t, l.srv)
			r := f.mustRun("load", "--mode", c.mode, "-i", l.srvIf, rules)
			if want := fmt.Sprintf("attached to %s (%s mode)\n", l.srvIf, c.want); !strings.Contains(r.stdout, want) {
				t.Errorf("load output lacks %q: %s", want, r)
			}
			st := f.status()
			if got := st.Interfaces[l.srvIf].Mode; got != c.want || len(st.Interfaces) != 1 {
				t.Errorf("status: mode %q, want %q:\n%s", got, c.want, st.raw)
			}
			if prog, id := xdpProg(t, l.srv, l.srvIf), st.attachedID(t, l.srvIf); prog != fmt.Sprintf("%s id %d", c.ipProg, id) {
				t.Errorf("ip -d link shows %q, want %s id %d", prog, c.ipProg, id)
			}
			if reads := st.Interfaces[l.srvIf].VLANReader != nil; reads != (c.want == "native") {
				t.Errorf("%s mode on a veth: xdpfw_rxvlan runs: %v, want %v:\n%s", c.mode, reads, !reads, st.raw)
			}
			checkTCP(t, c.mode,
				tcpProbe{from: l.cli, addr: hostPort(l.srv4, 22), ok: true},
				tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080), ok: false})
			f.mustRun("detach", "--all")
			f.wantNothingLoaded(l.srvIf)
		})
	}

	t.Run("offload", func(t *testing.T) {
		f := newFW(t, l.srv)
		r := f.runWant(1, "load", "--mode", "offload", "-i", l.srvIf, rules)
		if !strings.Contains(r.stderr, "offload") || !strings.HasPrefix(r.stderr, "xdpfw: ") {
			t.Errorf("the error does not explain offload: %s", r)
		}
		if strings.Contains(r.stdout, "attached") {
			t.Errorf("a failed load reports an attachment: %s", r)
		}
		f.wantNothingLoaded(l.srvIf)
		checkTCP(t, "after a failed offload load", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080), ok: true})
	})

	t.Run("offload on a loaded firewall", func(t *testing.T) {
		// A second interface to ask offload for (on an interface xdpfw
		// is attached to already, load keeps the mode it has).
		newLink(t, l.srv, "xsrv1", testutil.NewNetNS(t), "xcli1", 1)
		f := newFW(t, l.srv)
		// The rule in force gets a counter id that is not the lowest free
		// one: a restore that renumbers would show.
		f.mustRun("load", "-i", l.srvIf, writeRules(t, "two.rules",
			"-P INPUT DROP", "-A INPUT -p udp --dport 9 -j DROP", "-A INPUT -p tcp --dport 22 -j ACCEPT"))
		f.mustRun("delete", "INPUT", "1")
		before := f.status()
		open := writeRules(t, "open.rules", "-P INPUT ACCEPT", "-A INPUT -p udp --dport 9 -j DROP")
		r := f.runWant(1, "load", "--mode", "offload", "-i", "xsrv1", open)
		if !strings.Contains(r.stderr, "offload") {
			t.Errorf("the error does not explain offload: %s", r)
		}
		list := f.list()
		list.wantChain(t, "INPUT", "-A INPUT -p tcp --dport 22 -j ACCEPT")
		list.wantPolicy(t, "INPUT", "DROP")
		st := f.status()
		if st.Generation != before.Generation || len(st.Interfaces) != 1 || st.Interfaces[l.srvIf].Mode != "native" {
			t.Errorf("status changed by a failed load:\nbefore %s\nafter %s", before.raw, st.raw)
		}
		if prog := xdpProg(t, l.srv, "xsrv1"); prog != "" {
			t.Errorf("xsrv1 runs %q after a failed load", prog)
		}
		// What the kernel does must be what list says.
		checkTCP(t, "after a failed offload load",
			tcpProbe{from: l.cli, addr: hostPort(l.srv4, 22), ok: true},
			tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080), ok: false})
		tr, _ := f.trace("-p", "tcp", "--src", l.cli4, "--dst", l.srv4, "--dport", "8080")
		if len(tr) != 1 || tr[0].Verdict != "XDP_DROP" || !tr[0].Policy {
			t.Errorf("trace of tcp 8080 after a failed load: %+v, want XDP_DROP by the policy", tr)
		}
		t.Run("the rule in force keeps its counter", func(t *testing.T) {
			f := f.with(t)
			const ssh = "-A INPUT -p tcp --dport 22 -j ACCEPT"
			tr, r := f.trace("-p", "tcp", "--src", l.cli4, "--dst", l.srv4, "--dport", "22")
			list := f.list()
			if len(tr) != 1 || tr[0].Verdict != "XDP_PASS" || tr[0].RuleNum != 1 || tr[0].Rule != ssh ||
				list.rule(t, ssh).Counters.Packets < 2 {
				t.Errorf("after a failed load, the rule in force must keep its id and counter: %q "+
					"(list says id %d, trace reports rule id %d, list counts %d packets):\n%s",
					ssh, list.rule(t, ssh).ID, firstRuleID(tr), list.rule(t, ssh).Counters.Packets, r)
			}
		})
		wantStatusNamesAttachedProgram(t, f, l.srvIf)
	})
}

func firstRuleID(tr []traceResult) uint32 {
	if len(tr) == 0 {
		return 0
	}
	return tr[0].RuleID
}

// TestModeChangeRefused: asking for another mode on an interface xdpfw is
// already attached to is refused (changing it would leave a gap without
// filtering), and the firewall stays as it was.
func TestModeChangeRefused(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	f := newFW(t, l.srv)
	rules := writeRules(t, "drop.rules", "-P INPUT DROP")
	f.mustRun("load", "-i", l.srvIf, "--mode", "native", rules)
	before := f.status()
	r := f.runWant(1, "load", "-i", l.srvIf, "--mode", "generic", rules)
	if !strings.Contains(r.stderr, "native mode") || !strings.Contains(r.stderr, "detach it first") {
		t.Errorf("want an error naming the mode in effect and the way out: %s", r)
	}
	after := f.status()
	if after.Interfaces[l.srvIf].Mode != "native" || after.Generation != before.Generation || after.ProgramID != before.ProgramID {
		t.Errorf("a refused mode change changed the firewall: before %+v, after %+v", before, after)
	}
	if prog, id := xdpProg(t, l.srv, l.srvIf), after.attachedID(t, l.srvIf); !strings.HasSuffix(prog, fmt.Sprintf(" id %d", id)) {
		t.Errorf("%s runs %q, status names program %d", l.srvIf, prog, id)
	}
	// the same mode (or auto) just updates
	f.mustRun("load", "-i", l.srvIf, "--mode", "auto", rules)
}

// TestRecreatedInterface: an interface deleted and created again under the
// same name comes back without xdpfw (the kernel severs the link from the
// deleted one). status says so (NOT FILTERING, never a mode) and packets
// agree; `load` repairs it with a new link, and an -i rule follows the new
// ifindex; the daemon does the same by itself on the kernel's link event.
func TestRecreatedInterface(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	dropped := udpDropped(t, l, 5001)
	remove := func() { t.Helper(); ipOut(t, "-n", l.srv.Name, "link", "del", l.srvIf) }
	create := func() {
		t.Helper()
		testutil.VethPair(t, l.srv, l.srvIf, []string{l.srv4 + "/24", l.srv6 + "/64"}, l.cli, l.cliIf, []string{l.cli4 + "/24", l.cli6 + "/64"})
	}
	recreate := func() { t.Helper(); remove(); create() }
	fw := newFW(t, l.srv)
	wantFiltering := func(what string, want bool) {
		t.Helper()
		st := fw.status()
		i := st.Interfaces[l.srvIf]
		if i.Filtering != want || (want && i.Mode != "native") || (!want && i.Mode != "") {
			t.Fatalf("%s: status says filtering %v in mode %q, want filtering %v:\n%s", what, i.Filtering, i.Mode, want, st.raw)
		}
	}

	rules := writeRules(t, "drop.rules", "-A INPUT -i "+l.srvIf+" -p udp --dport 5001 -j DROP")
	fw.mustRun("load", "-i", l.srvIf, rules)
	if !dropped("loaded") {
		t.Fatal("the DROP rule does not drop")
	}
	recreate()
	wantFiltering("re-created", false)
	if r := fw.mustRun("status"); !strings.Contains(r.stdout, "NOT FILTERING: the link is severed") {
		t.Errorf("status does not say the re-created interface is not filtered:\n%s", r.stdout)
	}
	if dropped("re-created") {
		t.Fatal("re-created: dropped, yet status says not filtering")
	}
	fw.mustRun("load", "-i", l.srvIf, rules) // repairs
	wantFiltering("load again", true)
	if !dropped("load again") {
		t.Fatal("after load repaired the link: not dropped (the -i rule must follow the new ifindex)")
	}

	// The daemon attaches it again by itself.
	dir := t.TempDir()
	config := filepath.Join(dir, "xdpfw.yaml")
	writeAtomic(t, config, "interfaces: ["+l.srvIf+"]", "rules: "+rules, `metrics: {listen: ""}`)
	d := fw.startDaemon(config)
	// While the interface is gone, rule changes still go in force.
	remove()
	writeAtomic(t, rules, "-A INPUT -i "+l.srvIf+" -p udp --dport 5001 -j DROP", "-A INPUT -p udp --dport 5002 -j DROP")
	d.reloadedWant("applied")
	create()
	d.reloadedWant("applied")
	wantFiltering("daemon", true)
	if !dropped("daemon") {
		t.Fatal("after the daemon re-attached: not dropped")
	}
	if !strings.Contains(d.stderr.String(), "not filtered: the link is severed") {
		t.Errorf("the daemon's log does not say why it loaded:\n%s", d.stderr)
	}
}

// udpDropped returns a probe that says whether 5 datagrams from l's client
// to udp port on its server are dropped (all of them) or not (none). It
// checks the path with ping first: a re-created veth resolves its
// neighbours anew.
func udpDropped(t *testing.T, l *link, port int) func(what string) bool {
	sink := newUDPSink(t, l.srv, port)
	sender := newUDPSender(t, l.cli, "")
	addr := hostPort(l.srv4, port)
	n := 0
	return func(what string) bool {
		t.Helper()
		checkPing(t, what, l.cli, l.srv4, true)
		n++
		tag := fmt.Sprintf("%s-%d", what, n)
		sender.send(t, addr, tag, 0, 5)
		if got := sink.wait(t, tag, 5); got == 5 {
			return false
		}
		sink.sync(t)
		if got := sink.count(tag); got != 0 {
			t.Fatalf("%s: %d of 5 datagrams arrived: neither filtered nor not", what, got)
		}
		return true
	}
}

// TestLostPins: the bpffs is unmounted while something keeps it alive (a
// mount in another mount namespace; here an open directory), and an empty
// one mounted in its place. The links stay attached and filter, with no
// pin to reach them: status lists them (found through the kernel) and
// fails, detach --all detaches them, and load takes them over and pins
// them again.
func TestLostPins(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	dropped := udpDropped(t, l, 5001)
	f := newFW(t, l.srv)
	rules := writeRules(t, "drop.rules", "-A INPUT -p udp --dport 5001 -j DROP")
	root := filepath.Dir(f.pinDir)
	losePins := func() {
		t.Helper()
		keep, err := os.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { keep.Close() })
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("bpf", root, "bpf", 0, "mode=0700"); err != nil { // testutil.BPFFS's cleanup unmounts it
			t.Fatal(err)
		}
	}

	f.mustRun("load", "-i", l.srvIf, rules)
	losePins()
	if !dropped("pins lost") {
		t.Fatal("the links do not filter once their pins are lost: nothing to test")
	}
	r := f.run("status")
	if r.code != 1 || !strings.Contains(r.stdout, "interface "+l.srvIf) || !strings.Contains(r.stdout, "xdp") ||
		!strings.Contains(r.stderr, "nothing is pinned") {
		t.Errorf("status with the pins lost: want exit status 1 listing the xdp link on %s: %s", l.srvIf, r)
	}
	f.mustRun("detach", "--all")
	if prog := xdpProg(t, l.srv, l.srvIf); prog != "" {
		t.Errorf("after detach --all, %s still runs %q", l.srvIf, prog)
	}
	if dropped("detached") {
		t.Fatal("dropped after detach --all")
	}

	// load takes lost links over: the interface filters throughout.
	f.mustRun("load", "-i", l.srvIf, rules)
	before := xdpProg(t, l.srv, l.srvIf)
	losePins()
	f.mustRun("load", "-i", l.srvIf, rules)
	if st := f.status(); !st.Interfaces[l.srvIf].Filtering {
		t.Errorf("after load took the links over: %s", st.raw)
	}
	if _, err := os.Stat(filepath.Join(f.pinDir, "link_xdp_"+l.srvIf)); err != nil {
		t.Errorf("the taken-over link is not pinned again: %v", err)
	}
	if after := xdpProg(t, l.srv, l.srvIf); after == before || after == "" {
		t.Errorf("%s runs %q, before %q: want the new program, in the same link", l.srvIf, after, before)
	}
	if !dropped("taken over") {
		t.Fatal("not dropped after load took the links over")
	}

	// The daemon, started with the pins lost, takes them over too.
	losePins()
	config := filepath.Join(t.TempDir(), "xdpfw.yaml")
	writeAtomic(t, config, "interfaces: ["+l.srvIf+"]", "rules: "+rules, `metrics: {listen: ""}`)
	d := f.startDaemon(config)
	if !strings.Contains(d.stderr.String(), "its link is not pinned") {
		t.Errorf("the daemon does not say why it loaded:\n%s", d.stderr)
	}
	if _, err := os.Stat(filepath.Join(f.pinDir, "link_xdp_"+l.srvIf)); err != nil {
		t.Errorf("the daemon did not pin the link again: %v", err)
	}
	if !dropped("daemon took over") {
		t.Fatal("not dropped after the daemon took the links over")
	}
	d.signal(syscall.SIGTERM)
	if err := d.wait(); err != nil {
		t.Errorf("daemon exit after SIGTERM: %v\n%s", err, d.stderr)
	}
	f.mustRun("detach", "--all") // the old bpffs holds the link too: detached all the same
	if prog := xdpProg(t, l.srv, l.srvIf); prog != "" {
		t.Errorf("after detach --all, %s still runs %q", l.srvIf, prog)
	}
}

// TestDeviceWarnings: REJECT on a veth in native mode whose peer runs no
// XDP program would answer nothing (the kernel drops XDP_TX frames there):
// load warns of what its rules run into, with the remedy, and status shows
// it with the interface until it no longer holds. A veth passes on VLAN
// tags its peer's sender keeps beside the frame: in native mode XDP reads
// them (xdpfw_rxvlan), so no VLAN warning; in generic mode it cannot, and
// load and status say so, with why and the remedy.
func TestDeviceWarnings(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	f := newFW(t, l.srv)
	rulesFile := writeRules(t, "r.rules", "-A INPUT -p tcp --dport 5000 -j REJECT", "-A INPUT -m vlan --vlan-id 5 -j DROP")
	r := f.mustRun("load", "-i", l.srvIf, rulesFile)
	for _, want := range []string{"warning: " + l.srvIf + " is a veth in native mode and its peer " + l.cliIf,
		"REJECT answers nothing", "--mode generic"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("load does not warn %q: %s", want, r)
		}
	}
	if strings.Contains(r.stderr, "txvlan") {
		t.Errorf("native mode on a veth reads VLAN tags beside the frame, yet load warns of them: %s", r)
	}
	if st := f.status(); len(st.Interfaces[l.srvIf].Warnings) != 1 {
		t.Errorf("status: want the REJECT warning only with %s:\n%s", l.srvIf, st.raw)
	}
	if r := f.mustRun("list"); strings.Contains(r.stdout, "cannot see") {
		t.Errorf("list in native mode says a --vlan-id rule is blind:\n%s", r.stdout)
	}
	if r := f.mustRun("status"); !strings.Contains(r.stdout, "  vlan tags the NIC strips: read by xdpfw_rxvlan") {
		t.Errorf("status in native mode does not say xdpfw_rxvlan reads the tags:\n%s", r.stdout)
	}
	wantStatusNamesAttachedProgram(t, f, l.srvIf)
	xdpPass(t, l.cli, l.cliIf)
	if st := f.status(); len(st.Interfaces[l.srvIf].Warnings) != 0 {
		t.Errorf("status with XDP on the peer: want no warning:\n%s", st.raw)
	}

	f.mustRun("detach", "-i", l.srvIf)
	if r := f.mustRun("load", "-i", l.srvIf, "--mode", "generic", writeRules(t, "plain.rules", "-A INPUT -p tcp --dport 5000 -j DROP")); strings.Contains(r.stderr, "warning") {
		t.Errorf("load --mode generic without VLAN rules warns: %s", r)
	}
	for _, args := range [][]string{{"apply", "--check", "--on-host", rulesFile}, {"apply", rulesFile}} { // a VLAN rule appears
		r = f.mustRun(args...)
		for _, want := range []string{"warning: " + l.srvIf + " is a veth: a tag", "native mode only", "ethtool -K PEER txvlan off"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s of a --vlan-id rule in generic mode does not warn %q: %s", strings.Join(args[:len(args)-1], " "), want, r)
			}
		}
	}
	st := f.status()
	if w := st.Interfaces[l.srvIf].Warnings; len(w) != 1 || !strings.Contains(w[0], "txvlan") {
		t.Errorf("status in generic mode: want the VLAN warning only:\n%s", st.raw)
	}
	if r := f.mustRun("status"); !strings.Contains(r.stdout, "  warning: "+l.srvIf+" is a veth: a tag") {
		t.Errorf("status text does not show the warning:\n%s", r.stdout)
	}
	want := "-A INPUT -m vlan --vlan-id 5 -j DROP   [-m vlan cannot see VLAN tags on " + l.srvIf + ": see status]"
	if r := f.mustRun("list"); !strings.Contains(r.stdout, want) || strings.Count(r.stdout, "cannot see") != 1 {
		t.Errorf("list in generic mode: want the --vlan-id rule, and it alone, marked %q:\n%s", want, r.stdout)
	}
	var listing struct {
		Rules []struct {
			Rule      string   `json:"rule"`
			VLANBlind []string `json:"vlan_blind"`
		} `json:"rules"`
	}
	r = f.mustRun("list", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &listing); err != nil {
		t.Fatalf("list --json: %v", err)
	}
	for _, x := range listing.Rules {
		if w := strings.Contains(x.Rule, "--vlan-id"); w != (len(x.VLANBlind) == 1 && x.VLANBlind[0] == l.srvIf) {
			t.Errorf("list --json: %q has vlan_blind %v", x.Rule, x.VLANBlind)
		}
	}
}
