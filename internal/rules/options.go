package rules

// optSpec describes one option of a rule.
type optSpec struct {
	slot      string // options sharing a slot may appear once per rule; "": repeatable
	nargs     int    // number of arguments
	usage     string // the option with its arguments, for hints
	negatable bool   // may be preceded by "!"
	freeText  bool   // the argument is text: a bare "!" is a valid argument
	module    string // the -m MODULE that must precede the option
	parse     func(p *ruleParser, o optUse) *Error
}

// optUse is one occurrence of an option in a rule.
type optUse struct {
	opt    token   // the option itself
	args   []token // its arguments
	invert bool    // preceded by "!"
}

// lookupOption returns the description of a rule option (iptables spelling).
func lookupOption(name string) (optSpec, bool) {
	switch name {
	case "-4", "--ipv4", "-6", "--ipv6":
		return optSpec{slot: "family", usage: name, parse: (*ruleParser).optFamily}, true
	case "-t", "--table":
		return optSpec{slot: "-t", nargs: 1, usage: name + " filter", parse: (*ruleParser).optTable}, true
	case "-p", "--protocol":
		return optSpec{slot: "-p", nargs: 1, usage: "-p PROTOCOL", negatable: true,
			parse: (*ruleParser).optProto}, true
	case "-s", "--source", "--src":
		return optSpec{slot: "-s", nargs: 1, usage: name + " ADDRESS[/LENGTH]", negatable: true,
			parse: (*ruleParser).optSrc}, true
	case "-d", "--destination", "--dst":
		return optSpec{slot: "-d", nargs: 1, usage: name + " ADDRESS[/LENGTH]", negatable: true,
			parse: (*ruleParser).optDst}, true
	case "--sport", "--source-port":
		return optSpec{slot: "--sport", nargs: 1, usage: name + " PORT[:PORT]", negatable: true,
			parse: (*ruleParser).optSPort}, true
	case "--dport", "--destination-port":
		return optSpec{slot: "--dport", nargs: 1, usage: name + " PORT[:PORT]", negatable: true,
			parse: (*ruleParser).optDPort}, true
	case "--sports", "--source-ports":
		return optSpec{slot: "--sports", nargs: 1, usage: name + " PORT[,PORT:PORT...]", negatable: true,
			module: "multiport", parse: (*ruleParser).optSPorts}, true
	case "--dports", "--destination-ports":
		return optSpec{slot: "--dports", nargs: 1, usage: name + " PORT[,PORT:PORT...]", negatable: true,
			module: "multiport", parse: (*ruleParser).optDPorts}, true
	case "--ports":
		return optSpec{slot: "--ports", nargs: 1, usage: name + " PORT[,PORT:PORT...]", negatable: true,
			module: "multiport", parse: (*ruleParser).optPorts}, true
	case "-i", "--in-interface":
		return optSpec{slot: "-i", nargs: 1, usage: name + " NAME[+]", negatable: true,
			parse: (*ruleParser).optInIface}, true
	case "-o", "--out-interface":
		return optSpec{slot: "-o", nargs: 1, usage: name + " NAME[+]", negatable: true,
			parse: (*ruleParser).optOutIface}, true
	case "--mac-source":
		return optSpec{slot: name, nargs: 1, usage: name + " XX:XX:XX:XX:XX:XX", negatable: true,
			module: "mac", parse: (*ruleParser).optMACSrc}, true
	case "--mac-destination":
		return optSpec{slot: name, nargs: 1, usage: name + " XX:XX:XX:XX:XX:XX", negatable: true,
			module: "mac", parse: (*ruleParser).optMACDst}, true
	case "--tcp-flags":
		return optSpec{slot: "--tcp-flags", nargs: 2, usage: "--tcp-flags MASK COMP (e.g. SYN,ACK SYN)",
			negatable: true, parse: (*ruleParser).optTCPFlags}, true
	case "--syn":
		return optSpec{slot: "--tcp-flags", negatable: true, parse: (*ruleParser).optSyn}, true
	case "--icmp-type":
		return optSpec{slot: "--icmp-type", nargs: 1, usage: "--icmp-type TYPE[/CODE]", negatable: true,
			parse: (*ruleParser).optICMPType}, true
	case "--icmpv6-type":
		return optSpec{slot: "--icmp-type", nargs: 1, usage: "--icmpv6-type TYPE[/CODE]", negatable: true,
			parse: (*ruleParser).optICMPv6Type}, true
	case "--vlan-id":
		return optSpec{slot: name, nargs: 1, usage: "--vlan-id ID", negatable: true,
			module: "vlan", parse: (*ruleParser).optVLAN}, true
	case "--vlan-prio":
		return optSpec{slot: name, nargs: 1, usage: "--vlan-prio PCP", negatable: true,
			module: "vlan", parse: (*ruleParser).optVLANPrio}, true
	case "-f", "--fragment":
		return optSpec{slot: "-f", negatable: true, parse: (*ruleParser).optFragment}, true
	case "--match-set":
		return optSpec{nargs: 2, usage: "--match-set NAME src|dst", negatable: true,
			module: "set", parse: (*ruleParser).optMatchSet}, true
	case "--ctstate":
		return optSpec{slot: "ctstate", nargs: 1, usage: "--ctstate STATE[,STATE...]", negatable: true,
			module: "conntrack", parse: (*ruleParser).optCTState}, true
	case "--ctproto":
		return optSpec{slot: name, nargs: 1, usage: "--ctproto PROTOCOL", negatable: true,
			module: "conntrack", parse: (*ruleParser).optCTProto}, true
	case "--ctorigsrc", "--ctorigdst", "--ctreplsrc", "--ctrepldst":
		return optSpec{slot: name, nargs: 1, usage: name + " ADDRESS[/LENGTH]", negatable: true,
			module: "conntrack", parse: (*ruleParser).optCTAddr}, true
	case "--ctstatus":
		return optSpec{slot: name, nargs: 1, usage: "--ctstatus STATUS[,STATUS...]", negatable: true,
			module: "conntrack", parse: (*ruleParser).optCTStatus}, true
	case "--ctdir":
		return optSpec{slot: name, nargs: 1, usage: "--ctdir ORIGINAL|REPLY",
			module: "conntrack", parse: (*ruleParser).optCTDir}, true
	case "--state":
		return optSpec{slot: "ctstate", nargs: 1, usage: "--state STATE[,STATE...]", negatable: true,
			module: "state", parse: (*ruleParser).optCTState}, true
	case "--limit":
		return optSpec{slot: name, nargs: 1, usage: "--limit N/sec|min|hour|day", module: "limit",
			parse: (*ruleParser).optLimit}, true
	case "--limit-burst":
		return optSpec{slot: name, nargs: 1, usage: "--limit-burst N", module: "limit",
			parse: (*ruleParser).optLimitBurst}, true
	case "--set", "--rcheck", "--update", "--remove":
		return optSpec{slot: "recent-op", usage: "--set|--rcheck|--update|--remove", negatable: true, module: "recent",
			parse: (*ruleParser).optRecentOp}, true
	case "--seconds":
		return optSpec{slot: name, nargs: 1, usage: "--seconds N", module: "recent", parse: (*ruleParser).optRecentSeconds}, true
	case "--hitcount":
		return optSpec{slot: name, nargs: 1, usage: "--hitcount N", module: "recent", parse: (*ruleParser).optRecentHitCount}, true
	case "--name":
		return optSpec{slot: name, nargs: 1, usage: "--name NAME", module: "recent", parse: (*ruleParser).optRecentName}, true
	case "--rsource", "--rdest":
		return optSpec{slot: "recent-side", usage: "--rsource|--rdest", module: "recent", parse: (*ruleParser).optRecentSide}, true
	case "--mask":
		return optSpec{slot: name, nargs: 1, usage: "--mask NETMASK", module: "recent", parse: (*ruleParser).optRecentMask}, true
	case "--rttl":
		return optSpec{slot: name, module: "recent", parse: (*ruleParser).optRecentTTL}, true
	case "--reap":
		return optSpec{slot: name, module: "recent", parse: (*ruleParser).optRecentReap}, true
	case "--hashlimit-upto", "--hashlimit-above", "--hashlimit":
		return optSpec{slot: "hashlimit-rate", nargs: 1, usage: name + " N/sec|min|hour|day", negatable: true, module: "hashlimit",
			parse: (*ruleParser).optHashRate}, true
	case "--hashlimit-burst", "--hashlimit-srcmask", "--hashlimit-dstmask", "--hashlimit-htable-size", "--hashlimit-htable-max",
		"--hashlimit-htable-gcinterval", "--hashlimit-htable-expire":
		return optSpec{slot: name, nargs: 1, usage: name + " N", module: "hashlimit", parse: (*ruleParser).optHashUint}, true
	case "--hashlimit-mode":
		return optSpec{slot: name, nargs: 1, usage: "--hashlimit-mode srcip,srcport,dstip,dstport", module: "hashlimit",
			parse: (*ruleParser).optHashMode}, true
	case "--hashlimit-name":
		return optSpec{slot: name, nargs: 1, usage: "--hashlimit-name NAME", module: "hashlimit", parse: (*ruleParser).optHashName}, true
	case "--hashlimit-rate-match", "--hashlimit-rate-interval":
		return optSpec{slot: name, module: "hashlimit", parse: (*ruleParser).optHashRateMatch}, true
	case "--connlimit-above", "--connlimit-upto":
		return optSpec{slot: "connlimit-limit", nargs: 1, usage: name + " N", negatable: true, module: "connlimit",
			parse: (*ruleParser).optConnLimit}, true
	case "--connlimit-mask":
		return optSpec{slot: name, nargs: 1, usage: "--connlimit-mask PREFIX", module: "connlimit", parse: (*ruleParser).optConnLimitMask}, true
	case "--connlimit-saddr", "--connlimit-daddr":
		return optSpec{slot: "connlimit-side", usage: "--connlimit-saddr|--connlimit-daddr", module: "connlimit",
			parse: (*ruleParser).optConnLimitSide}, true
	case "--pkt-type":
		return optSpec{slot: name, nargs: 1, usage: "--pkt-type unicast|broadcast|multicast", negatable: true,
			module: "pkttype", parse: (*ruleParser).optPktType}, true
	case "--src-type", "--dst-type":
		return optSpec{slot: name, nargs: 1, usage: name + " TYPE[,TYPE...]", negatable: true,
			module: "addrtype", parse: (*ruleParser).optAddrType}, true
	case "--limit-iface-in", "--limit-iface-out":
		return optSpec{slot: "--limit-iface", usage: name, module: "addrtype", parse: (*ruleParser).optAddrLimit}, true
	case "--src-range", "--dst-range":
		return optSpec{slot: name, nargs: 1, usage: name + " FROM-TO", negatable: true, module: "iprange",
			parse: map[string]func(*ruleParser, optUse) *Error{"--src-range": (*ruleParser).optSrcRange,
				"--dst-range": (*ruleParser).optDstRange}[name]}, true
	case "--length":
		return optSpec{slot: name, nargs: 1, usage: "--length MIN[:MAX]", negatable: true, module: "length",
			parse: (*ruleParser).optLength}, true
	case "--ttl-eq", "--ttl-lt", "--ttl-gt":
		return optSpec{slot: "ttl", nargs: 1, usage: name + " N", negatable: name == "--ttl-eq", module: "ttl",
			parse: (*ruleParser).optTTL}, true
	case "--hl-eq", "--hl-lt", "--hl-gt":
		return optSpec{slot: "ttl", nargs: 1, usage: name + " N", negatable: name == "--hl-eq", module: "hl",
			parse: (*ruleParser).optTTL}, true
	case "--dscp", "--dscp-class":
		return optSpec{slot: "dscp", nargs: 1, usage: name + map[bool]string{true: " CLASS", false: " N"}[name == "--dscp-class"],
			negatable: true, module: "dscp", parse: (*ruleParser).optDSCP}, true
	case "--tos":
		return optSpec{slot: name, nargs: 1, usage: "--tos VALUE[/MASK]", negatable: true, module: "tos",
			parse: (*ruleParser).optTOS}, true
	case "--rt-type", "--rt-len":
		return optSpec{slot: name, nargs: 1, usage: name + " N", negatable: true, module: "rt",
			parse: (*ruleParser).optRTValue}, true
	case "--rt-segsleft":
		return optSpec{slot: name, nargs: 1, usage: name + " N[:M]", negatable: true, module: "rt",
			parse: (*ruleParser).optRTSegs}, true
	case "--rt-0-res", "--rt-0-not-strict":
		return optSpec{module: "rt", parse: (*ruleParser).optRT0}, true
	case "--rt-0-addrs":
		return optSpec{nargs: 1, usage: name + " ADDR[,ADDR...]", module: "rt", parse: (*ruleParser).optRT0}, true
	case "--mss":
		return optSpec{slot: name, nargs: 1, usage: "--mss MIN[:MAX]", negatable: true, module: "tcpmss",
			parse: (*ruleParser).optMSS}, true
	case "--ecn-tcp-ece", "--ecn-tcp-cwr":
		return optSpec{slot: name, usage: name, negatable: true, module: "ecn", parse: (*ruleParser).optECNTCP}, true
	case "--ecn-ip-ect":
		return optSpec{slot: name, nargs: 1, usage: "--ecn-ip-ect 0-3", negatable: true, module: "ecn",
			parse: (*ruleParser).optECNIP}, true
	case "--comment":
		return optSpec{nargs: 1, usage: `--comment "TEXT"`, freeText: true,
			module: "comment", parse: (*ruleParser).optComment}, true
	case "-m", "--match":
		return optSpec{nargs: 1, usage: name + " MODULE", parse: (*ruleParser).optModule}, true
	case "-j", "--jump":
		return optSpec{slot: "-j", nargs: 1, usage: "-j ACCEPT|DROP|REJECT|LOG|NFLOG|RETURN|CHAIN", parse: (*ruleParser).optJump}, true
	case "-g", "--goto":
		return optSpec{slot: "-j", nargs: 1, usage: "-g CHAIN", parse: (*ruleParser).optGoto}, true
	case "--reject-with":
		return optSpec{slot: name, nargs: 1, usage: "--reject-with TYPE", parse: (*ruleParser).optRejectWith}, true
	case "--log-prefix":
		return optSpec{slot: name, nargs: 1, usage: `--log-prefix "TEXT"`, freeText: true,
			parse: (*ruleParser).optLogPrefix}, true
	case "--log-level":
		return optSpec{slot: name, nargs: 1, usage: "--log-level LEVEL", parse: (*ruleParser).optLogLevel}, true
	case "--log-tcp-sequence", "--log-tcp-options", "--log-ip-options", "--log-uid", "--log-macdecode":
		return optSpec{slot: name, parse: (*ruleParser).optLogFlag}, true
	case "--nflog-prefix", "--ulog-prefix":
		return optSpec{slot: "group-prefix", nargs: 1, usage: name + ` "TEXT"`, freeText: true,
			parse: (*ruleParser).optGroupOption}, true
	case "--nflog-group", "--ulog-nlgroup", "--nflog-range", "--nflog-threshold", "--ulog-qthreshold":
		return optSpec{slot: name, nargs: 1, usage: name + " N", parse: (*ruleParser).optGroupOption}, true
	case "--nflog-size", "--ulog-cprange":
		return optSpec{slot: "group-size", nargs: 1, usage: name + " N", parse: (*ruleParser).optGroupOption}, true
	case "--mark":
		return optSpec{slot: name, nargs: 1, usage: "--mark VALUE[/MASK]", negatable: true,
			module: "mark", parse: (*ruleParser).optMark}, true
	case "--notrack":
		return optSpec{slot: name, parse: (*ruleParser).optNotrack}, true
	case "--zone", "--zone-orig", "--zone-reply", "--helper", "--ctevents", "--expevents", "--timeout":
		return optSpec{slot: name, nargs: 1, usage: name + " VALUE", parse: (*ruleParser).optCTOther}, true
	case "--log":
		return optSpec{slot: name, usage: "--log", parse: (*ruleParser).optLog}, true
	case "--to-destination", "--to-source":
		return optSpec{slot: name, nargs: 1, usage: name + " ADDR[-ADDR][:PORT[-PORT]]", parse: (*ruleParser).optNATTo}, true
	case "--to-ports":
		return optSpec{slot: name, nargs: 1, usage: name + " PORT[-PORT]", parse: (*ruleParser).optNATPorts}, true
	case "--random", "--random-fully", "--persistent":
		return optSpec{slot: name, parse: (*ruleParser).optNATFlag}, true
	case "--log-rate":
		return optSpec{slot: name, nargs: 1, usage: "--log-rate N/sec|min|hour|day", parse: (*ruleParser).optLogRate}, true
	case "--log-burst":
		return optSpec{slot: name, nargs: 1, usage: "--log-burst N", parse: (*ruleParser).optLogBurst}, true
	case "-c", "--set-counters":
		return optSpec{slot: "-c", nargs: 2, usage: name + " PACKETS BYTES", parse: (*ruleParser).optCounters}, true
	}
	return optSpec{}, false
}

// moduleOptions names the options of the modules that need one, for errors.
func moduleOptions(module string) (string, bool) {
	switch module {
	case "multiport":
		return "--sports, --dports or --ports", true
	case "mac":
		return "--mac-source or --mac-destination", true
	case "vlan":
		return "--vlan-id or --vlan-prio", true
	case "comment":
		return "--comment", true
	case "set":
		return "--match-set NAME src|dst", true
	case "conntrack":
		return "--ctstate, --ctproto, --ctorigsrc, --ctorigdst, --ctreplsrc, --ctrepldst, --ctstatus or --ctdir", true
	case "mark":
		return "--mark VALUE[/MASK]", true
	case "state":
		return "--state", true
	case "iprange":
		return "--src-range or --dst-range", true
	case "length":
		return "--length", true
	case "ttl":
		return "--ttl-eq, --ttl-lt or --ttl-gt", true
	case "hl":
		return "--hl-eq, --hl-lt or --hl-gt", true
	case "dscp":
		return "--dscp or --dscp-class", true
	case "tos":
		return "--tos", true
	case "ecn":
		return "--ecn-tcp-ece, --ecn-tcp-cwr or --ecn-ip-ect", true
	case "tcpmss":
		return "--mss", true
	case "pkttype":
		return "--pkt-type", true
	case "addrtype":
		return "--src-type or --dst-type", true
	}
	return "", false
}

// supportedModules is the hint given for an unsupported -m module.
const supportedModules = "supported modules: tcp, udp, sctp, udplite, icmp, icmp6 (after -p), " +
	"multiport, mac, vlan, comment, set, conntrack (--ctstate, --ctproto, --ctstatus, --ctdir), state (--state), limit, recent, hashlimit, connlimit, " +
	"mark (OUTPUT), pkttype, addrtype, iprange, length, ttl, hl, dscp, tos, ecn, tcpmss, rt"
