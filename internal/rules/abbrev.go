package rules

import (
	"sort"
	"strings"
)

// iptables reads a rule with getopt_long over a table of long options that
// grows while it reads: its own options first, then those of each
// extension as the rule loads it (-m NAME; the protocol's match, -p tcp's
// "tcp", the first time an option is unknown or ambiguous; the target's
// after -j). A long option may be abbreviated to any prefix that names one
// option of the table at that moment, and an exact name wins over
// prefixes. So `-p tcp -m multiport --dport 80,443` is multiport's
// --dports (the tcp match is not loaded yet: --dport is a prefix of
// --dports only), `-p tcp --dport 80 -m multiport --sports 1,2` is tcp's
// --dport, and `--ctst` after -m conntrack names --ctstate and --ctstatus
// at once: iptables refuses it. longOption resolves a rule's long option
// the same way, so that a rule means what it means to iptables.

// longOpt is one long option of an iptables option table: its name
// without the dashes, the spelling lookupOption knows it by, and its group:
// synonyms (--sport, --source-port) are one option, not an ambiguity.
type longOpt struct{ name, canon, group string }

// longOpts builds an option table from words "name", "name~group" (a
// synonym of group) or "name>canon" (lookupOption knows it as canon).
func longOpts(words ...string) []longOpt {
	out := make([]longOpt, 0, len(words))
	for _, w := range words {
		o := longOpt{name: w}
		if n, g, ok := strings.Cut(w, "~"); ok {
			o.name, o.group = n, g
		}
		if n, c, ok := strings.Cut(o.name, ">"); ok {
			o.name, o.canon = n, c
		}
		if o.canon == "" {
			o.canon = "--" + o.name
		}
		if o.group == "" {
			o.group = o.name
		}
		out = append(out, o)
	}
	return out
}

// baseLongOpts are iptables' own long options (xtables 1.8.9,
// iptables/iptables.c original_opts).
var baseLongOpts = longOpts("append", "delete", "check", "insert", "replace", "list", "list-rules", "flush",
	"zero", "new-chain", "delete-chain", "rename-chain", "policy", "source", "src~source", "destination",
	"dst~destination", "protocol", "in-interface", "jump", "table", "match", "numeric", "out-interface",
	"verbose", "wait", "wait-interval", "exact", "fragments>--fragment", "version", "help", "line-numbers",
	"modprobe", "set-counters", "goto", "ipv4", "ipv6")

// extLongOpts are the long options of the extensions xdpfw reads, as
// iptables 1.8.9 defines them (all of them, supported or not: a prefix is
// unique only among all), by -m name or -j target.
var extLongOpts = map[string][]longOpt{
	"tcp": longOpts("source-port~sport", "sport", "destination-port~dport", "dport", "syn", "tcp-flags",
		"tcp-option"),
	"udp":       longOpts("source-port~sport", "sport", "destination-port~dport", "dport"),
	"sctp":      longOpts("source-port~sport", "sport", "destination-port~dport", "dport", "chunk-types"),
	"dccp":      longOpts("source-port~sport", "sport", "destination-port~dport", "dport", "dccp-types", "dccp-option"),
	"icmp":      longOpts("icmp-type"),
	"icmp6":     longOpts("icmpv6-type"),
	"multiport": longOpts("source-ports~sports", "sports", "destination-ports~dports", "dports", "ports"),
	"mac":       longOpts("mac-source"),
	"comment":   longOpts("comment"),
	"set": longOpts("match-set", "set", "return-nomatch", "update-counters", "update-subcounters", "packets-eq",
		"packets-lt", "packets-gt", "bytes-eq", "bytes-lt", "bytes-gt"),
	"conntrack": longOpts("ctstate", "ctproto", "ctorigsrc", "ctorigdst", "ctreplsrc", "ctrepldst", "ctstatus",
		"ctexpire", "ctorigsrcport", "ctorigdstport", "ctreplsrcport", "ctrepldstport", "ctdir"),
	"state":     longOpts("state"),
	"limit":     longOpts("limit", "limit-burst"),
	"recent":    longOpts("set", "rcheck", "update", "remove", "seconds", "reap", "hitcount", "rttl", "name", "rsource", "rdest", "mask"),
	"mark":      longOpts("mark"),
	"pkttype":   longOpts("pkt-type"),
	"addrtype":  longOpts("src-type", "dst-type", "limit-iface-in", "limit-iface-out"),
	"iprange":   longOpts("src-range", "dst-range"),
	"length":    longOpts("length"),
	"ttl":       longOpts("ttl-eq", "ttl-lt", "ttl-gt", "ttl>--ttl-eq~ttl-eq"),
	"hl":        longOpts("hl-eq", "hl-lt", "hl-gt", "hl>--hl-eq~hl-eq"),
	"dscp":      longOpts("dscp", "dscp-class"),
	"tos":       longOpts("tos"),
	"ecn":       longOpts("ecn-tcp-cwr", "ecn-tcp-ece", "ecn-ip-ect"),
	"tcpmss":    longOpts("mss"),
	"rt":        longOpts("rt-type", "rt-segsleft", "rt-len", "rt-0-res", "rt-0-addrs", "rt-0-not-strict"),
	"hashlimit": longOpts("hashlimit~hashlimit-upto", "hashlimit-upto", "hashlimit-above", "hashlimit-burst", "hashlimit-mode", "hashlimit-srcmask", "hashlimit-dstmask", "hashlimit-name", "hashlimit-htable-size", "hashlimit-htable-max", "hashlimit-htable-gcinterval", "hashlimit-htable-expire", "hashlimit-rate-match", "hashlimit-rate-interval"),
	"connlimit": longOpts("connlimit-upto", "connlimit-above", "connlimit-mask", "connlimit-saddr", "connlimit-daddr"),
	// targets
	"LOG":        longOpts("log-level", "log-prefix", "log-tcp-sequence", "log-tcp-options", "log-ip-options", "log-uid", "log-macdecode"),
	"REJECT":     longOpts("reject-with"),
	"NFLOG":      longOpts("nflog-group", "nflog-prefix", "nflog-range", "nflog-size", "nflog-threshold"),
	"ULOG":       longOpts("ulog-nlgroup", "ulog-prefix", "ulog-cprange", "ulog-qthreshold"),
	"DNAT":       longOpts("to-destination", "random", "persistent"),
	"SNAT":       longOpts("to-source", "random", "random-fully", "persistent"),
	"MASQUERADE": longOpts("to-ports", "random", "random-fully"),
	"REDIRECT":   longOpts("to-ports", "random"),
	"CT":         longOpts("notrack", "helper", "ctevents", "expevents", "zone", "zone-orig", "zone-reply", "timeout"),
}

// protoExt is the match iptables loads for -p PROTO when an option is
// unknown ("" for none: -p udplite has no match of its own in iptables).
func protoExt(proto uint8) string {
	switch proto {
	case protoTCP:
		return "tcp"
	case protoUDP:
		return "udp"
	case protoSCTP:
		return "sctp"
	case protoDCCP:
		return "dccp"
	case protoICMP:
		return "icmp"
	case protoICMPv6:
		return "icmp6"
	}
	return ""
}

// longOption resolves the long option t (--NAME) as iptables would at this
// point of the rule: it returns the spelling lookupOption knows, or t's own
// text when the table has no option of that name or prefix (lookupOption
// then explains it, as for xdpfw's own options), or an error when the
// prefix names several options.
func (p *ruleParser) longOption(t token) (string, *Error) {
	name := strings.TrimPrefix(t.text, "--")
	if name == t.text || name == "" {
		return t.text, nil
	}
	for {
		canon, amb := p.resolveLong(name)
		if canon != "" {
			return canon, nil
		}
		// unknown or ambiguous: iptables loads the protocol's match once
		// and reads the option again
		if !p.protoLoaded {
			p.protoLoaded = true
			if pr := p.r.Match.Proto; pr != nil && !pr.Invert && protoExt(pr.Proto) != "" {
				p.loaded[protoExt(pr.Proto)] = true
				continue
			}
		}
		if len(amb) > 1 {
			return "", p.errAt(t, t.text, "ambiguous option: it abbreviates "+strings.Join(amb, ", "),
				"write the option in full (iptables refuses it too)")
		}
		return t.text, nil
	}
}

// resolveLong looks name up in the option table of the rule so far: the
// option it names exactly or as the prefix of one option only, or the
// options it is a prefix of when there are several.
func (p *ruleParser) resolveLong(name string) (string, []string) {
	tables := [][]longOpt{baseLongOpts}
	for ext := range p.loaded {
		tables = append(tables, extLongOpts[ext])
	}
	prefixed := map[string]string{} // group -> the spelling lookupOption knows
	for _, tab := range tables {
		for _, o := range tab {
			if o.name == name {
				return o.canon, nil
			}
			if strings.HasPrefix(o.name, name) && prefixed[o.group] == "" {
				prefixed[o.group] = o.canon
			}
		}
	}
	var amb []string
	for _, c := range prefixed {
		amb = append(amb, c)
	}
	if len(amb) == 1 {
		return amb[0], nil
	}
	sort.Strings(amb)
	return "", amb
}

// loadExt records that the rule loaded extension name (-m name, -j name):
// its options join the table longOption reads.
func (p *ruleParser) loadExt(name string) {
	if _, ok := extLongOpts[name]; ok {
		p.loaded[name] = true
	}
	if name == "multiport" { // a new match: its option is still to come
		p.multiport = nil
	}
}

// exactOnly reports whether the rule's option text is one of xdpfw's own
// options (no iptables equivalent): they are read by their full name only.
func exactOnly(text string) bool {
	switch text {
	case "--log", "--log-rate", "--log-burst", "--vlan-id", "--vlan-prio", "--mac-destination":
		return true
	}
	return false
}
