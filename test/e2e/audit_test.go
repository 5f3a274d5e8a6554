package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// auditRecord is the part of a `xdpfw log --json` line an audit event
// adds to (the test's own type: the contract).
type auditRecord struct {
	Audit   string  `json:"audit"`
	Rule    int     `json:"rule"`
	Verdict string  `json:"verdict"`
	By      string  `json:"decided_by"`
	DPort   *uint16 `json:"dport"`
}

// auditListJSON is `xdpfw audit list --json`.
type auditListJSON struct {
	File     string `json:"file"`
	Counters struct {
		Seen        struct{ Packets uint64 } `json:"seen"`
		WouldDrop   struct{ Packets uint64 } `json:"would_drop"`
		WouldAccept struct{ Packets uint64 } `json:"would_accept"`
	} `json:"counters"`
	Candidate struct {
		Rules []struct {
			Num      int    `json:"num"`
			Rule     string `json:"rule"`
			Counters struct {
				Packets uint64 `json:"packets"`
			} `json:"counters"`
		} `json:"rules"`
	} `json:"candidate"`
}

// TestAuditCLI: audit start checks a candidate on real TCP traffic while
// the rules in force decide; xdpfw log reports the differing verdicts,
// audit list counts; promote puts the candidate in force; stop ends an
// audit.
func TestAuditCLI(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, 5001, 5002)
	est := "-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT"
	enforced := writeRules(t, "enforced.rules", "-P INPUT DROP", est, "-A INPUT -p tcp --dport 5001 -j ACCEPT")
	cand := writeRules(t, "cand.rules", "-P INPUT DROP", est, "-A INPUT -p tcp --dport 5002 -j ACCEPT")
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, enforced)
	waitTCP(t, l.cli, hostPort(l.srv4, 5001))
	if r := f.mustRun("audit", "start", cand); !strings.Contains(r.stdout, "nothing enforced") {
		t.Fatalf("audit start: %s", r)
	}
	checkTCP(t, "while auditing", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 5001), ok: true},
		tcpProbe{from: l.cli, addr: hostPort(l.srv4, 5002), ok: false})

	r := f.mustRun("log", "--json")
	var drop, accept int
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var rec auditRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log --json: %v: %q", err, line)
		}
		switch {
		case rec.Audit == "would drop" && rec.DPort != nil && *rec.DPort == 5001:
			if rec.Verdict != "DROP" || rec.By != "2" {
				t.Errorf("would drop: %+v; want the candidate's policy DROP against the enforced rule 2", rec)
			}
			drop++
		case rec.Audit == "would accept" && rec.DPort != nil && *rec.DPort == 5002:
			if rec.Verdict != "ACCEPT" || rec.Rule != 2 || rec.By != "policy" {
				t.Errorf("would accept: %+v; want the candidate's rule 2 ACCEPT against the enforced policy", rec)
			}
			accept++
		default:
			t.Errorf("an event this traffic should not cause: %s", line)
		}
	}
	if drop == 0 || accept == 0 {
		t.Fatalf("audit events: %d would drop (tcp/5001), %d would accept (tcp/5002); want both\n%s", drop, accept, r.stdout)
	}
	var a auditListJSON
	f.decode(&a, "audit", "list", "--json")
	if !strings.HasSuffix(a.File, "cand.rules") || a.Counters.WouldDrop.Packets == 0 || a.Counters.WouldAccept.Packets == 0 ||
		len(a.Candidate.Rules) != 2 || a.Candidate.Rules[1].Counters.Packets == 0 || a.Candidate.Rules[0].Counters.Packets == 0 {
		t.Fatalf("audit list: %+v", a)
	}
	var st struct {
		Audit *struct {
			File      string `json:"file"`
			WouldDrop uint64 `json:"would_drop"`
		} `json:"audit"`
	}
	f.decode(&st, "status", "--json")
	if st.Audit == nil || st.Audit.WouldDrop == 0 || !strings.HasSuffix(st.Audit.File, "cand.rules") {
		t.Errorf("status --json: audit %+v", st.Audit)
	}
	if r := f.mustRun("status"); !strings.Contains(r.stdout, "audit: ") {
		t.Errorf("status does not show the audit:\n%s", r.stdout)
	}
	if r := f.mustRun("list", "--audit"); !strings.Contains(r.stdout, "would drop") || !strings.Contains(r.stdout, "--dport 5002") {
		t.Errorf("list --audit:\n%s", r.stdout)
	}

	f.mustRun("audit", "promote")
	checkTCP(t, "after promote", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 5002), ok: true},
		tcpProbe{from: l.cli, addr: hostPort(l.srv4, 5001), ok: false})
	if r := f.mustRun("audit", "list"); !strings.Contains(r.stdout, "no audit runs") {
		t.Errorf("audit list after promote: %s", r)
	}
	f.mustRun("audit", "start", enforced)
	f.mustRun("audit", "stop")
	if r := f.mustRun("audit", "list"); !strings.Contains(r.stdout, "no audit runs") {
		t.Errorf("audit list after stop: %s", r)
	}
	st.Audit = nil // decode leaves a field the JSON lacks as it was
	f.decode(&st, "status", "--json")
	if st.Audit != nil {
		t.Errorf("status --json after stop: audit %+v", st.Audit)
	}
	checkTCP(t, "after stop", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 5002), ok: true})
}
