package rules

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error is an
// ErrorList with positions inside the input, and that every accepted input
// round-trips: Parse(String(rs)) == rs, and String is a fixed point.
func FuzzParse(f *testing.F) {
	for _, file := range []string{"testdata/iptables-save.v4", "testdata/ip6tables-save.v6", "testdata/native.rules", "testdata/dual-family.rules"} {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src, uint8(0))
		f.Add(src, uint8(1))
		f.Add(src, uint8(2))
	}
	f.Fuzz(func(t *testing.T, src []byte, fam uint8) {
		opt := ParseOptions{Family: []Family{FamilyAny, FamilyIPv4, FamilyIPv6}[fam%3]}
		rs, err := Parse("fuzz", src, opt)
		if err != nil {
			if rs != nil {
				t.Fatal("rule set returned with an error")
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
			}
			lines := strings.Count(string(src), "\n") + 1
			for _, e := range list {
				if e.Pos.File != "fuzz" || e.Pos.Line < 1 || e.Pos.Line > lines || e.Pos.Col < 1 || e.Msg == "" {
					t.Fatalf("bad error position or message: %+v", e)
				}
			}
			_ = err.Error()
			return
		}
		for i, r := range rs.Rules {
			if err := checkRule(r) + checkTarget(r.Target, "filter"); err != "" {
				t.Fatalf("rule %d %q: %s", i, r.Text, err)
			}
			if r.Text != r.Spec() {
				t.Fatalf("rule %d: Text %q != Spec %q", i, r.Text, r.Spec())
			}
		}
		for table, rules := range map[string][]Rule{"raw": rs.Raw, "priority": rs.Priority} {
			for i, r := range rules {
				if err := checkTarget(r.Target, table); err != "" {
					t.Fatalf("%s rule %d %q: %s", table, i, r.Text, err)
				}
			}
		}
		text := rs.String()
		for _, o := range []ParseOptions{{}, opt} {
			again, err := Parse("again", []byte(text), o)
			if err != nil {
				t.Fatalf("canonical form rejected (family %v): %v\n%s", o.Family, err, text)
			}
			if d := diffRuleSets(rs, again); d != "" && o.Family == FamilyAny {
				t.Fatalf("round trip: %s\n%s", d, text)
			}
			if got := again.String(); got != text && o.Family == FamilyAny {
				t.Fatalf("String not stable:\n%s\nvs\n%s", text, got)
			}
		}
	})
}

// checkRule returns what breaks an invariant of parsed rules, or "".
func checkRule(r Rule) string {
	m := r.Match
	switch f := m.ImpliedFamily(); {
	case f != FamilyAny && f != m.Family:
		return "family differs from the implied family"
	}
	for _, a := range []*AddrMatch{m.Src, m.Dst} {
		if a != nil && (a.Prefix != a.Prefix.Masked() || !a.Prefix.IsValid()) {
			return "prefix not masked"
		}
	}
	if m.Src != nil && m.Dst != nil && m.Src.Prefix.Addr().Is4() != m.Dst.Prefix.Addr().Is4() {
		return "mixed address families"
	}
	if m.Proto != nil && m.Proto.Proto == 0 {
		return "proto 0 stored"
	}
	for _, pm := range []*PortMatch{m.SPort, m.DPort, m.Ports} {
		if pm == nil {
			continue
		}
		if len(pm.Ranges) == 0 || m.Proto == nil || m.Proto.Invert || !isPortProto(m.Proto.Proto) {
			return "ports without a port protocol"
		}
		for _, pr := range pm.Ranges {
			if pr.Lo > pr.Hi {
				return "reversed port range"
			}
		}
	}
	if m.TCPFlags != nil && (m.Proto == nil || m.Proto.Proto != protoTCP || m.Proto.Invert) {
		return "--tcp-flags without -p tcp"
	}
	if c := m.ICMP; c != nil {
		if m.Proto == nil || m.Proto.Invert || (m.Proto.Proto != protoICMP && m.Proto.Proto != protoICMPv6) {
			return "ICMP type without an ICMP protocol"
		}
		if c.Code < -1 || c.Code > 255 {
			return "ICMP code out of range"
		}
	}
	if i := m.InIface; i != nil && (len(i.Name) > maxIfaceLen || i.Name == "" && !i.Prefix) {
		return "bad interface"
	}
	if v := m.VLAN; v != nil && v.ID > maxVLANID {
		return "VLAN id out of range"
	}
	return ""
}

// tableVerdicts are the verdicts the rules of each table may have (the
// filter table's RuleSet.Rules, RuleSet.Raw, RuleSet.Priority).
var tableVerdicts = map[string][]Verdict{
	"filter":   {VerdictAccept, VerdictDrop, VerdictReject, VerdictLog, VerdictJump, VerdictGoto, VerdictReturn, VerdictNone},
	"raw":      {VerdictNotrack},
	"priority": {VerdictHigh, VerdictBulk},
}

// checkTarget returns what breaks an invariant of the target of a parsed
// rule of table, or "": a verdict of another table (or none known), a
// chain without a jump or goto (or the reverse), --log on a rule that
// decides nothing, LOG options on a rule that logs nothing.
func checkTarget(t Target, table string) string {
	v := t.Verdict
	switch {
	case !slices.Contains(tableVerdicts[table], v):
		return fmt.Sprintf("verdict %v in the %s table", v, table)
	case (t.Chain != "") != (v == VerdictJump || v == VerdictGoto):
		return fmt.Sprintf("chain %q with verdict %v", t.Chain, v)
	case t.Log && !v.Terminal():
		return fmt.Sprintf("--log with verdict %v", v)
	case (t.LogPrefix != "" || t.LogLevel != "" || t.LogFlags != 0) && !t.Log && v != VerdictLog:
		return "LOG options on a rule that does not log"
	case t.NAT != nil:
		return "a translation outside the nat table"
	}
	return ""
}
