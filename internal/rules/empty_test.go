package rules

import "testing"

// TestEmpty: a file with no rule, no policy and no *filter section is
// empty, whatever blank lines, comments or carriage returns it holds; a
// policy or an empty *filter section is not.
func TestEmpty(t *testing.T) {
	for src, want := range map[string]bool{
		"":                          true,
		"\n\n":                      true,
		"   \t\n":                   true,
		"\r":                        true,
		"\r\n\r\n":                  true,
		"# nothing here\n# yet\n":   true,
		"-P INPUT ACCEPT\n":         false,
		"-A INPUT -j ACCEPT\n":      false,
		"*filter\nCOMMIT\n":         false,
		"*filter\r\nCOMMIT\r\n":     false,
		"# x\n*filter\n# y\nCOMMIT": false,
	} {
		rs, err := Parse("f", []byte(src), ParseOptions{})
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if rs.Empty() != want {
			t.Errorf("%q: Empty() = %v", src, rs.Empty())
		}
	}
}

// TestLaterFilterSectionReplaces: as iptables-restore does, a second
// *filter section replaces the first one's rules and policies entirely
// (checked against iptables-restore (nf_tables) 1.8.9 in a namespace);
// rules outside any section stay.
func TestLaterFilterSectionReplaces(t *testing.T) {
	src := `-A OUTPUT -p udp -j ACCEPT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
-A INPUT -p tcp --dport 22 -j DROP
COMMIT
*filter
:INPUT DROP [0:0]
-A INPUT -p udp --dport 53 -j ACCEPT
COMMIT
`
	rs, err := Parse("f", []byte(src), ParseOptions{Family: FamilyIPv4})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Rules) != 2 || rs.Rules[0].String() != "-A OUTPUT -4 -p udp -j ACCEPT" || rs.Rules[1].String() != "-A INPUT -4 -p udp --dport 53 -j ACCEPT" {
		t.Errorf("rules: %v", rs.Rules)
	}
	if rs.PolicyFor(ChainInput, FamilyIPv4) != VerdictDrop || rs.PolicyFor(ChainForward, FamilyIPv4) != VerdictAccept {
		t.Errorf("policies: %v", rs.Policies)
	}
	if rs.Tables != 2 {
		t.Errorf("tables %d", rs.Tables)
	}
}
