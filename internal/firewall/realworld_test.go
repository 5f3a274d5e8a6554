package firewall

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// realWorldNotYet are the files of testdata/realworld that do not load yet,
// with the refusal each gets (a substring of the error). When support
// lands the file loads, this test fails, and the entry goes: the table is
// the list of what users still cannot bring (docs/compat.md).
var realWorldNotYet = map[string]string{
	// kube-proxy's mark is set by the kernel's nat table, after XDP
	"k8s-node.v4": "-m mark in KUBE-FORWARD is not supported",
	// tailscaled marks in filter FORWARD (-j MARK, skippable) and accepts
	// by the mark: a mark XDP never sees
	"tailscale-node.v4": "-m mark in ts-forward is not supported",
	// IPv6_rpfilter=yes: -m rpfilter --invert -j DROP in the raw table
	"firewalld-public.v6": "module rpfilter is not supported",
	// strongSwan's forwarded traffic accepted by its IPsec policy: XDP sees
	// the ESP packets, not what the kernel decrypts from them
	"algo-vpn.v4": "module policy is not supported",
	// ipset timeouts: fail2ban's and CrowdSec's bans expire in the kernel
	"fail2ban-ipset.v4":   `"timeout": unsupported set option`,
	"crowdsec-bouncer.v4": `"timeout": unsupported set option`,
	// Docker 28's direct-routing protection: DROP in raw PREROUTING
	"docker28-networks.v4": "-j DROP in the raw table is not supported",
	// Suricata inline (NFQ): a user-space program decides
	"suricata-ips.v4": "target NFQUEUE is not supported",
	// Neutron's hybrid driver filters bridged frames by bridge port
	"openstack-neutron.v4": "module physdev is not supported",
	// the tor user's connections, by the socket's owner
	"tor-transparent-proxy.v4": "module owner is not supported",
	// SIP scanners by their User-Agent: payload
	"asterisk-voip.v4": "module string is not supported",
	// wg-quick's full-tunnel rule: DROP in raw PREROUTING, as Docker 28's
	"wg-quick-client.v4": "-j DROP in the raw table is not supported",
}

// realWorldSets reads the sets a rule set's -m set rules name from the
// `ipset save` file beside it (FILE.ipset), as `xdpfw set restore` reads
// it, for Check: no file, no sets.
func realWorldSets(file string) (map[string]compile.SetInfo, error) {
	src, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := rules.ParseIpsetSave(file, src, func(string) (rules.SetKind, bool) { return rules.SetKind{}, false })
	if err != nil {
		return nil, err
	}
	sets := map[string]compile.SetInfo{}
	for i, c := range r.Creates {
		sets[c.Name] = compile.SetInfo{ID: uint32(i + 1), Family: c.Kind.Family}
	}
	return sets, nil
}

// TestRealWorldRuleSets: the rule sets of testdata/realworld, written after
// well-known setups (ufw, Docker, Kubernetes, OpenWrt fw3, fail2ban, the
// Arch wiki's stateful firewall, RH-Firewall, firewalld, Shorewall, csf,
// libvirt, LXD, Tailscale, Proxmox, a PPPoE router, WireGuard, ZeroTier, a
// Tor relay...) and each checked to load into real
// iptables-restore (legacy and nft) when it was written, go through the
// same check as `xdpfw apply --check --skip-unsupported` (tables other than
// filter and raw NOTRACK skipped, every line of them listed).
func TestRealWorldRuleSets(t *testing.T) {
	files, err := filepath.Glob("testdata/realworld/*.v[46]")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule sets in testdata/realworld (%v)", err)
	}
	p := Paths{PinDir: t.TempDir(), StateDir: t.TempDir()}
	loaded := 0
	for _, f := range files {
		name := filepath.Base(f)
		src := rules.Sources{IPv4File: f, SkipUnsupported: true}
		if strings.HasSuffix(f, ".v6") {
			src = rules.Sources{IPv6File: f, SkipUnsupported: true}
		}
		rs, err := rules.ReadFiles(src)
		var sets map[string]compile.SetInfo
		if err == nil {
			sets, err = realWorldSets(f + ".ipset")
		}
		var res *CheckResult
		if err == nil {
			res, err = Check(p, rs, Options{}, sets, false)
		}
		want, notYet := realWorldNotYet[name]
		switch {
		case err == nil && notYet:
			t.Errorf("%s loads now (%d entries): take it out of realWorldNotYet (and docs/compat.md)", name, res.Entries)
		case err == nil:
			loaded++
			t.Logf("%s: %d rules, %d entries, %d lines skipped, %d warnings", name, len(rs.Rules), res.Entries, len(rs.Skipped), len(res.Warnings))
		case !notYet:
			t.Errorf("%s: %v", name, err)
		case !strings.Contains(err.Error(), want):
			t.Errorf("%s: refused with %q, want %q", name, err, want)
		}
	}
	t.Logf("%d of %d real-world rule sets load", loaded, len(files))
	if _, err := os.Stat(p.StateDir); err != nil {
		t.Fatal(err)
	}
}
