package compile

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestABIMirrorsHeader reads bpf/types.h and bpf/maps.h and checks that the
// Go mirror of their enums and constants (abi.go) is the same, so the two
// sides cannot drift apart silently.
func TestABIMirrorsHeader(t *testing.T) {
	h, err := os.ReadFile("../../bpf/types.h")
	if err != nil {
		t.Fatal(err)
	}
	src := string(h)

	// enum fw_reason, in order
	body := regexp.MustCompile(`(?s)enum fw_reason \{(.*?)\};`).FindStringSubmatch(src)[1]
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(FW_(?:R_)?[A-Z0-9_]+)`).FindAllStringSubmatch(body, -1) {
		names = append(names, m[1])
	}
	want := map[string]Reason{
		"FW_R_RULE_ACCEPT": ReasonRuleAccept, "FW_R_RULE_DROP": ReasonRuleDrop, "FW_R_RULE_REJECT": ReasonRuleReject,
		"FW_R_POLICY_ACCEPT": ReasonPolicyAccept, "FW_R_POLICY_DROP": ReasonPolicyDrop, "FW_R_NOT_IP": ReasonNotIP,
		"FW_R_NO_RULESET": ReasonNoRuleset, "FW_R_BAD_ETH": ReasonBadEth, "FW_R_BAD_VLAN": ReasonBadVLAN,
		"FW_R_VLAN_DEPTH": ReasonVLANDepth, "FW_R_BAD_IPV4": ReasonBadIPv4, "FW_R_BAD_IPV6": ReasonBadIPv6,
		"FW_R_BAD_EXTHDR": ReasonBadExtHdr, "FW_R_EXTHDR_DEPTH": ReasonExtHdrDepth, "FW_R_BAD_L4": ReasonBadL4,
		"FW_R_CT_FULL":     ReasonCTFull,
		"FW_R_REJECT_RATE": ReasonRejectRate, "FW_R_REJECT_ERROR": ReasonRejectError, "FW_R_REJECT_FRAG": ReasonRejectFrag,
		"FW_R_REJECT_BCAST": ReasonRejectBcast, "FW_R_REJECT_FAIL": ReasonRejectFail,
		"FW_R_FRAG_UNKNOWN": ReasonFragUnknown, "FW_R_FRAG_OVERLAP": ReasonFragOverlap,
		"FW_R_BAD_PPPOE": ReasonBadPPPoE, "FW_R_PPPOE_SESSION": ReasonPPPoESession,
		"FW_R_NAT_FAIL": ReasonNATFail, "FW_R_FWD_EXPIRED": ReasonFwdExpired,
		"FW_R_FWD_NOT_UNICAST": ReasonFwdNotUnicast,
		"FW_NUM_REASONS":       NumReasons,
	}
	if len(names) != len(want) {
		t.Fatalf("enum fw_reason has %d members %v, Go mirrors %d", len(names), names, len(want))
	}
	for i, n := range names {
		if r, ok := want[n]; !ok || int(r) != i {
			t.Errorf("enum fw_reason: %s is %d in C, %d in Go (known: %v)", n, i, r, ok)
		}
	}

	// enum fw_reject, in order
	rej := regexp.MustCompile(`(?s)enum fw_reject \{(.*?)\};`).FindStringSubmatch(src)
	if rej == nil {
		t.Fatal("enum fw_reject not found")
	}
	var rnames []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(FW_(?:REJ6?_|NUM_REJECTS)[A-Z0-9_]*)`).FindAllStringSubmatch(rej[1], -1) {
		rnames = append(rnames, m[1])
	}
	wantRej := map[string]Reject{
		"FW_REJ_PORT_UNREACH": RejectPortUnreach, "FW_REJ_TCP_RESET": RejectTCPReset, "FW_REJ_NET_UNREACH": RejectNetUnreach,
		"FW_REJ_HOST_UNREACH": RejectHostUnreach, "FW_REJ_PROTO_UNREACH": RejectProtoUnreach, "FW_REJ_NET_PROHIB": RejectNetProhib,
		"FW_REJ_HOST_PROHIB": RejectHostProhib, "FW_REJ_ADMIN_PROHIB": RejectAdminProhib, "FW_REJ6_NO_ROUTE": Reject6NoRoute,
		"FW_REJ6_ADM_PROHIB": Reject6AdmProhib, "FW_REJ6_ADDR_UNREACH": Reject6AddrUnreach, "FW_NUM_REJECTS": NumRejects,
	}
	if len(rnames) != len(wantRej) {
		t.Fatalf("enum fw_reject has %d members %v, Go mirrors %d", len(rnames), rnames, len(wantRej))
	}
	for i, n := range rnames {
		if r, ok := wantRej[n]; !ok || int(r) != i {
			t.Errorf("enum fw_reject: %s is %d in C, %d in Go (known: %v)", n, i, r, ok)
		}
	}

	define := func(name string) int64 {
		m := regexp.MustCompile(`#define ` + name + `\s+\(?([^/\n]+?)\)?\s*(/\*|\n)`).FindStringSubmatch(src)
		if m == nil {
			t.Fatalf("#define %s not found", name)
		}
		v := strings.TrimSpace(m[1])
		if sh := regexp.MustCompile(`^1u(?:ll)? << (\d+)$`).FindStringSubmatch(v); sh != nil {
			n, _ := strconv.Atoi(sh[1])
			return 1 << n
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(v, "ULL"), 0, 64)
		if err != nil {
			t.Fatalf("#define %s %q: %v", name, v, err)
		}
		return n
	}
	for name, goVal := range map[string]uint64{
		"FW_M_FAMILY": MFamily, "FW_M_PROTO": MProto, "FW_M_SRC": MSrc, "FW_M_DST": MDst,
		"FW_M_SPORT": MSPort, "FW_M_DPORT": MDPort, "FW_M_IFINDEX": MIfindex, "FW_M_MACSRC": MMACSrc,
		"FW_M_MACDST": MMACDst, "FW_M_TCPFLAGS": MTCPFlags, "FW_M_ICMPTYPE": MICMPType, "FW_M_ICMPCODE": MICMPCode,
		"FW_M_VLAN": MVLAN, "FW_M_FRAG": MFrag, "FW_M_L4HDR": ML4Hdr, "FW_M_SRCSET": MSrcSet,
		"FW_M_DSTSET": MDstSet, "FW_M_CTSTATE": MCTState, "FW_M_MARK": MMark, "FW_M_OIF": MOif, "FW_M_PKTTYPE": MPktType, "FW_M_SRCTYPE": MSrcType, "FW_M_DSTTYPE": MDstType,
		"FW_M_LEN": MLen, "FW_M_TTL": MTTL, "FW_M_TOS": MTOS,
		"FW_M_ECNIP": MECNIP, "FW_M_ECNTCP": MECNTCP, "FW_M_SRCRANGE": MSrcRange, "FW_M_DSTRANGE": MDstRange,
		"FW_M_MSS": MMSS, "FW_ROOT_MSS": uint64(RootMSS), "FW_ROOT_CT": uint64(RootCT), "FW_ROOT_RT": uint64(RootRT),
		"FW_M_RTTYPE": MRTType, "FW_M_RTSEGS": MRTSegs, "FW_M_RTLEN": MRTLen,
		"FW_M_CTDIR": MCTDir, "FW_M_CTSTATUS": MCTStatus, "FW_M_CTPROTO": MCTProto,
		"FW_CTI_EXPECTED": uint64(CTIExpected), "FW_CTI_SEEN_REPLY": uint64(CTISeenReply), "FW_CTI_ASSURED": uint64(CTIAssured),
		"FW_CTI_CONFIRMED": uint64(CTIConfirmed), "FW_CTI_REPLY": uint64(CTIReply),
		"FW_M_CTNAT": MCTNat, "FW_CTI_SRC_NAT": uint64(CTISrcNAT), "FW_CTI_DST_NAT": uint64(CTIDstNAT),
	} {
		if c := define(name); c != int64(goVal) {
			t.Errorf("%s: C %#x, Go %#x", name, c, goVal)
		}
	}
	if c := define("FW_REJECT_RATE_DEFAULT"); c != DefaultRejectRate {
		t.Errorf("FW_REJECT_RATE_DEFAULT: C %d, Go %d", c, DefaultRejectRate)
	}
	if c := define("FW_REJECT_BURST_DEFAULT"); c != DefaultRejectBurst {
		t.Errorf("FW_REJECT_BURST_DEFAULT: C %d, Go %d", c, DefaultRejectBurst)
	}
	if c := define("FW_REJECT_GLOBAL_RATE_DEFAULT"); c != DefaultRejectGlobalRate {
		t.Errorf("FW_REJECT_GLOBAL_RATE_DEFAULT: C %d, Go %d", c, DefaultRejectGlobalRate)
	}
	if c := define("FW_FIRST_RULE_ID"); c != FirstRuleID {
		t.Errorf("FW_FIRST_RULE_ID: C %d, Go %d", c, FirstRuleID)
	}
	for _, a := range []struct {
		name string
		v    Action
	}{{"FW_ACT_ACCEPT", ActAccept}, {"FW_ACT_DROP", ActDrop}, {"FW_ACT_REJECT", ActReject}, {"FW_ACT_LOG", ActLog}, {"FW_ACT_NOTRACK", ActNotrack}} {
		m := regexp.MustCompile(a.name + `\s*=\s*(\d+)`).FindStringSubmatch(src)
		if m == nil || m[1] != strconv.Itoa(int(a.v)) {
			t.Errorf("%s: C %v, Go %d", a.name, m, a.v)
		}
	}
	for name, goVal := range map[string]int{"FW_TREE_DEPTH": MaxDepth, "FW_LEAF_MAX": MaxLeaf,
		"FW_DELTA_MAX": DeltaMax, "FW_DELTA_DEAD": DeltaDeadMax,
		"FW_KEY_FRAG": KeyFrag, "FW_KEY_L4": KeyL4, "FW_KEY_FLAGS_SHIFT": KeyFlagsShift, "FW_VLAN_UNTAGGED": VLANUntagged, "FW_ROOT_CT": int(RootCT), "FW_ROOT_RAW": int(RootRaw), "FW_MAX_RAW": MaxRaw,
		"FW_EF_LOG": int(EntryLog), "FW_EF_RANGES": int(EntryHasRanges), "FW_EF_LIMIT": int(EntryLimit),
		"FW_EF_STATE": int(EntryState), "FW_EF_HASHLIMIT": int(EntryHashLimit), "FW_EF_CONNLIMIT": int(EntryConnLimit),
		"FW_MAX_CONNLIMIT_RULES": MaxConnLimitRules, "FW_CONNLIMIT_MAX": ConnLimitMax, "FW_CONNLIMIT_SLOTS": ConnLimitSlots,
		"FW_CL_F_ABOVE": int(ConnLimitFlagAbove), "FW_CL_F_DADDR": int(ConnLimitFlagDaddr), "FW_STATE_MAX": MaxStateNotes, "FW_MAX_RECENT_RULES": MaxRecentRules,
		"FW_RECENT_STAMPS": RecentStamps, "FW_RECENT_MAX": RecentMax,
		"FW_RECENT_F_DEST": int(RecentFlagDest), "FW_RECENT_F_INVERT": int(RecentFlagInvert),
		"FW_RECENT_F_TTL": int(RecentFlagTTL),
		"FW_EF_COUNT":     int(EntryCount), "FW_COUNT_MAX": MaxCountPerPacket,
		"FW_EF_NOTE": int(EntryNote), "FW_PROBE_MAX": MaxProbes,
		"FW_MAX_LIMIT_RULES": MaxLimitRules, "FW_BUCKET_MATCH": int(BucketMatch), "FW_RANGES_MAX": RangesMax, "FW_LOG_MAX": MaxLogPerPacket, "FW_MAX_LOG_RULES": MaxLogRules,
		"FW_LOG_SNAP_MAX": MaxLogSnap, "FW_LOG_SNAP_DEFAULT": DefaultLogSnap,
		"FW_NODE_THRESH": NodeThresh, "FW_NODE_CHILDREN": NodeChildren, "FW_NO_THRESH": int(NoThresh),
		"FW_REF_LEAF": RefLeaf, "FW_NO_TREE": int(NoTree)} {
		if c := define(name); c != int64(goVal) {
			t.Errorf("%s: C %d, Go %d", name, c, goVal)
		}
	}
	dims := regexp.MustCompile(`(?s)enum fw_dim \{(.*?)\};`).FindStringSubmatch(src)
	if dims == nil {
		t.Fatal("enum fw_dim not found")
	}
	var dnames []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(FW_(?:D_|NUM_DIMS)[A-Z0-9_]*)`).FindAllStringSubmatch(dims[1], -1) {
		dnames = append(dnames, m[1])
	}
	wantDims := []string{"FW_D_SRC0", "FW_D_SRC1", "FW_D_SRC2", "FW_D_SRC3", "FW_D_DST0", "FW_D_DST1", "FW_D_DST2", "FW_D_DST3",
		"FW_D_SPORT", "FW_D_DPORT", "FW_D_PROTO", "FW_D_IFINDEX", "FW_D_VLAN", "FW_D_MACSRC_HI", "FW_D_MACSRC_LO",
		"FW_D_MACDST_HI", "FW_D_MACDST_LO", "FW_D_TCPFLAGS", "FW_D_ICMP", "FW_D_FLAGS", "FW_D_CTSTATE", "FW_D_OIFINDEX", "FW_D_LEN", "FW_D_TTL", "FW_D_TOS", "FW_NUM_DIMS"}
	if strings.Join(dnames, ",") != strings.Join(wantDims, ",") || len(wantDims)-1 != NumDims {
		t.Errorf("enum fw_dim is %v; Go mirrors %v (NumDims %d)", dnames, wantDims, NumDims)
	}
	for name, goVal := range map[string]uint8{"FW_CT_NEW": CTNew, "FW_CT_ESTABLISHED": CTEstablished,
		"FW_CT_RELATED": CTRelated, "FW_CT_INVALID": CTInvalid, "FW_CT_UNTRACKED": CTUntracked} {
		m := regexp.MustCompile(name + `\s*=\s*(\d+)`).FindStringSubmatch(src)
		if m == nil || m[1] != strconv.Itoa(int(goVal)) {
			t.Errorf("%s: C %v, Go %d", name, m, goVal)
		}
	}
	for name, goVal := range map[string]uint8{"FW_PT_HOST": rules.PktHost, "FW_PT_BROADCAST": rules.PktBroadcast,
		"FW_PT_MULTICAST": rules.PktMulticast, "FW_NUM_PKTTYPES": NumPktTypes} {
		m := regexp.MustCompile(name + `\s*=?\s*(\d*),`).FindStringSubmatch(src)
		want := strconv.Itoa(int(goVal))
		if name == "FW_NUM_PKTTYPES" {
			want = "" // the enum's count: the value after FW_PT_MULTICAST
			if goVal != rules.PktMulticast+1 {
				t.Errorf("NumPktTypes %d, want %d", goVal, rules.PktMulticast+1)
			}
		}
		if m == nil || m[1] != want {
			t.Errorf("%s: C %v, Go %d", name, m, goVal)
		}
	}
	rtn := regexp.MustCompile(`(?s)enum fw_rtn \{(.*?)\};`).FindStringSubmatch(src)
	if rtn == nil {
		t.Fatal("enum fw_rtn not found")
	}
	var rtnNames []string
	for _, m := range regexp.MustCompile(`FW_RTN_([A-Z]+)`).FindAllStringSubmatch(rtn[1], -1) {
		rtnNames = append(rtnNames, m[1])
	}
	if want := strings.Join(rules.AddrTypeNames(), ","); strings.Join(rtnNames, ",") != want || !strings.Contains(rtn[1], "FW_NUM_RTN,") {
		t.Errorf("enum fw_rtn is %v; rules' address types %s", rtnNames, want)
	}
	for name, goVal := range map[string]uint8{"FW_TD_NONE": rules.LimitNone, "FW_TD_IN": rules.LimitIn, "FW_TD_OUT": rules.LimitOut} {
		if c := define(name); c != int64(goVal) {
			t.Errorf("%s: C %d, Go %d", name, c, goVal)
		}
	}
	// rules.CT* bits are 1 << state
	for st, bit := range map[uint8]uint8{CTNew: rules.CTNew, CTEstablished: rules.CTEstablished,
		CTRelated: rules.CTRelated, CTInvalid: rules.CTInvalid, CTUntracked: rules.CTUntracked} {
		if 1<<st != bit {
			t.Errorf("rules bit of %s is %#x, want 1<<%d", CTStateName(st), bit, st)
		}
	}
	// Tree references: LeafRef / LeafOf
	for _, def := range []string{
		fmt.Sprintf("#define FW_REF_FIRST(ref) ((ref) & %#08x)", MaxLeafSlots-1),
		fmt.Sprintf("#define FW_REF_COUNT(ref) (((ref) >> %d) & 0x7f)", refCountShift),
	} {
		if !strings.Contains(src, def) {
			t.Errorf("%q not in bpf/types.h; update LeafRef and LeafOf", def)
		}
	}
	// Policy ids: FW_POLICY_ID(chain, v6) = 1 + chain*2 + v6
	if !strings.Contains(src, "#define FW_POLICY_ID(chain, v6) (1 + (chain) * 2 + (v6))") {
		t.Error("FW_POLICY_ID changed; update PolicyID")
	}
}
