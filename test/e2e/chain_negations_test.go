package e2e

import (
	"math/rand/v2"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// chainNegationRules are chains that RETURN for two protocols, or two
// MAC addresses, or two ICMP types, then act on the rest, as real rule
// sets write them: before session 25 xdpfw refused them (two negations of
// one field have no single classifier entry); now the protocols become
// one entry per protocol number left, the others probes.
const chainNegationRules = `-P INPUT ACCEPT
-N protos
-N macs
-N icmps
-A INPUT -j protos
-A INPUT -j macs
-A INPUT -4 -p icmp -j icmps
-A protos -p tcp -j RETURN
-A protos -p udp -j RETURN
-A protos -j LOG
-A protos -4 -p icmp -j ACCEPT
-A protos -j DROP
-A macs -m mac --mac-source 02:00:00:00:00:01 -j RETURN
-A macs -m mac --mac-source 02:00:00:00:00:02 -j RETURN
-A macs -p tcp --dport 22 -j ACCEPT
-A macs -p udp -j REJECT
-A icmps -4 -p icmp --icmp-type 8 -j RETURN
-A icmps -4 -p icmp --icmp-type 0 -j RETURN
-A icmps -j DROP
`

// TestIptablesChainNegations: chainNegationRules through iptables-legacy,
// iptables-nft and xdpfw (the differential test's bed): no rule is left
// out, and every rule's and policy's counters agree on every side.
func TestIptablesChainNegations(t *testing.T) {
	testutil.RequireRoot(t)
	rs, err := rules.Parse("negations.rules", []byte(chainNegationRules), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bed := newDiffBed(t)
	ph := diffPhases[0]
	bed.setPhase(ph)
	st := diffStats{refused: map[string]int{}}
	r := rand.New(rand.NewPCG(25, 1))
	if !bed.runSet(rs, r, ph, 300, &st, "chain negations", "go test -count=1 -run TestIptablesChainNegations ./test/e2e/") {
		t.Fatal("the sides disagree")
	}
	if len(st.refused) != 0 || st.refusedSets != 0 {
		t.Fatalf("xdpfw left rules out: %v", st.refused)
	}
	if st.byUserChain == 0 {
		t.Fatal("no probe was decided in a user chain")
	}
	t.Logf("%d probes, %d decided by a rule, %d in a user chain: the three sides agree", st.probes, st.byRule, st.byUserChain)
}
