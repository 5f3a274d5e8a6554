package rules

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// restoreCases are -I, -D and -R sequences inside a *filter section, with
// what iptables-restore v1.8.9 (legacy and nf_tables back ends) made of them
// in a throwaway namespace: the rules iptables-save then printed (in
// xdpfw's canonical form), or the line it refused ("line N failed").
// TestRestoreCommandsLikeIptables checks xdpfw against the record, and
// TestRestoreCommandsLive against iptables itself where it can run.
var restoreCases = []struct {
	name    string
	lines   []string
	want    []string // the rules after the COMMIT
	errLine int      // iptables-restore refused this line of the section (1-based, after *filter)
}{
	{"insert 4 of 3 appends", []string{
		"-A INPUT -s 10.0.0.1 -j ACCEPT", "-A INPUT -s 10.0.0.2 -j ACCEPT", "-A INPUT -s 10.0.0.3 -j ACCEPT",
		"-I INPUT 4 -s 10.0.0.4 -j DROP",
	}, []string{"-A INPUT -s 10.0.0.1/32 -j ACCEPT", "-A INPUT -s 10.0.0.2/32 -j ACCEPT", "-A INPUT -s 10.0.0.3/32 -j ACCEPT", "-A INPUT -s 10.0.0.4/32 -j DROP"}, 0},
	{"insert 5 of 3", []string{
		"-A INPUT -s 10.0.0.1 -j ACCEPT", "-A INPUT -s 10.0.0.2 -j ACCEPT", "-A INPUT -s 10.0.0.3 -j ACCEPT",
		"-I INPUT 5 -s 10.0.0.5 -j DROP",
	}, nil, 4},
	{"insert, delete by rule and by number", []string{
		"-A INPUT -s 10.0.0.1 -j ACCEPT", "-A INPUT -s 10.0.0.2 -j ACCEPT", "-A INPUT -s 10.0.0.3 -j ACCEPT",
		"-I INPUT -s 10.0.0.0 -j DROP",
		"-I INPUT 2 -s 10.0.0.9 -j DROP",
		"-D INPUT -s 10.0.0.2/32 -j ACCEPT",
		"-D INPUT 1",
	}, []string{"-A INPUT -s 10.0.0.9/32 -j DROP", "-A INPUT -s 10.0.0.1/32 -j ACCEPT", "-A INPUT -s 10.0.0.3/32 -j ACCEPT"}, 0},
	{"chains number apart", []string{
		"-A OUTPUT -j ACCEPT", "-A INPUT -s 10.0.0.1 -j ACCEPT", "-A OUTPUT -p tcp -j DROP",
		"-I OUTPUT 2 -p udp -j DROP", "-I INPUT 1 -p icmp -j ACCEPT", "-D OUTPUT 1",
	}, []string{"-A INPUT -p icmp -j ACCEPT", "-A INPUT -s 10.0.0.1/32 -j ACCEPT", "-A OUTPUT -p udp -j DROP", "-A OUTPUT -p tcp -j DROP"}, 0},
	{"delete the first of two equal rules", []string{
		"-A INPUT -p tcp --dport 22 -j ACCEPT", "-A INPUT -j DROP", "-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT",
		"-D INPUT -p tcp --dport 22 -j ACCEPT",
	}, []string{"-A INPUT -j DROP", "-A INPUT -p tcp --dport 22 -j ACCEPT"}, 0},
	{"delete a rule that is not there", []string{
		"-A INPUT -s 10.0.0.1 -j ACCEPT", "-D INPUT -s 10.0.0.1 -p tcp -j ACCEPT",
	}, nil, 2},
	{"delete past the end", []string{"-A INPUT -j ACCEPT", "-D INPUT 2"}, nil, 2},
	{"delete 0", []string{"-A INPUT -j ACCEPT", "-D INPUT 0"}, nil, 2},
	{"insert 0", []string{"-I INPUT 0 -j ACCEPT"}, nil, 1},
	{"delete by number with a rule", []string{"-A INPUT -j ACCEPT", "-D INPUT 1 -j ACCEPT"}, nil, 2},
	{"replace", []string{"-A INPUT -j ACCEPT", "-A INPUT -p udp -j DROP", "-R INPUT 2 -p tcp -j DROP"},
		[]string{"-A INPUT -j ACCEPT", "-A INPUT -p tcp -j DROP"}, 0},
	{"delete then insert into the empty chain", []string{
		"-A FORWARD -j DROP", "-D FORWARD -j DROP", "-I FORWARD 1 -s 10.1.0.0/16 -j ACCEPT",
	}, []string{"-A FORWARD -s 10.1.0.0/16 -j ACCEPT"}, 0},
}

// restoreFile is the iptables-restore file of a case.
func restoreFile(lines []string) string {
	return "*filter\n" + strings.Join(lines, "\n") + "\nCOMMIT\n"
}

// rulesText returns the rules of rs as iptables-save orders them: chain by
// chain, as "-A CHAIN spec" lines (without the -4 every rule of an IPv4
// file has).
func rulesText(rs *RuleSet) []string {
	var out []string
	for c := range Chain(NumChains) {
		for _, r := range rs.Rules {
			if r.Chain == c {
				out = append(out, strings.Replace(r.String(), " -4 ", " ", 1))
			}
		}
	}
	return out
}

func TestRestoreCommandsLikeIptables(t *testing.T) {
	for _, tt := range restoreCases {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := Parse("r", []byte(restoreFile(tt.lines)), ParseOptions{Family: FamilyIPv4})
			if tt.errLine != 0 {
				var el ErrorList
				if err == nil {
					t.Fatalf("no error, rules %q; iptables-restore refused line %d", rulesText(rs), tt.errLine+1)
				}
				if !asList(err, &el) || len(el) != 1 || el[0].Pos.Line != tt.errLine+1 {
					t.Fatalf("error %v, want one at line %d", err, tt.errLine+1)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rulesText(rs); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("rules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// asList finds the ErrorList in err.
func asList(err error, el *ErrorList) bool {
	l, ok := err.(ErrorList)
	*el = l
	return ok
}

// TestRestoreCommandsLive runs every case through iptables-legacy-restore
// and iptables-nft-restore in a throwaway namespace and requires xdpfw's
// parse to agree: the same rules (iptables-save's, parsed back), or an
// error where iptables-restore fails. It keeps the record above honest.
func TestRestoreCommandsLive(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	for _, backend := range []string{"legacy", "nft"} {
		restore, save := "iptables-"+backend+"-restore", "iptables-"+backend+"-save"
		if _, err := exec.LookPath(restore); err != nil {
			t.Logf("%s not installed: skipped", restore)
			continue
		}
		for _, tt := range restoreCases {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			file := restoreFile(tt.lines)
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns.Name, restore)
			cmd.Stdin = strings.NewReader(file)
			out, rerr := cmd.CombinedOutput()
			rs, err := Parse("r", []byte(file), ParseOptions{Family: FamilyIPv4})
			if ee, ok := rerr.(*exec.ExitError); ok && !ee.Exited() {
				cancel() // iptables-nft-restore v1.8.9 crashes on -R
				t.Logf("%s %s: %s crashed (%v): not compared", backend, tt.name, restore, rerr)
				continue
			}
			if rerr != nil {
				cancel()
				if err == nil {
					t.Errorf("%s %s: iptables refused (%s), xdpfw took %q", backend, tt.name, strings.TrimSpace(string(out)), rulesText(rs))
				}
				if tt.errLine == 0 {
					t.Errorf("%s %s: the record says iptables takes it; it said %s", backend, tt.name, out)
				}
				continue
			}
			saved, serr := ns.Exec(ctx, save, "-t", "filter")
			cancel()
			if serr != nil {
				t.Fatalf("%s: %v: %s", save, serr, saved)
			}
			var lines []string
			for _, l := range strings.Split(string(saved), "\n") {
				if strings.HasPrefix(l, "-A ") {
					lines = append(lines, l)
				}
			}
			theirs, perr := Parse(save, []byte(strings.Join(lines, "\n")), ParseOptions{Family: FamilyIPv4})
			if perr != nil {
				t.Fatalf("%s %s: parsing iptables-save: %v", backend, tt.name, perr)
			}
			if err != nil {
				t.Errorf("%s %s: iptables took it, xdpfw: %v", backend, tt.name, err)
				continue
			}
			if a, b := strings.Join(rulesText(theirs), "\n"), strings.Join(rulesText(rs), "\n"); a != b {
				t.Errorf("%s %s: iptables\n%s\nxdpfw\n%s", backend, tt.name, a, b)
			}
		}
	}
}
