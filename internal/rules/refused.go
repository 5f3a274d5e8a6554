package rules

// refusal says why xdpfw cannot run an iptables target or table, and what to
// do instead. docs/compat.md ("Targets", "Tables") lists the same reasons.
type refusal struct {
	why  string // what it does that XDP/tc cannot
	hint string // what to do instead
	// skippable: leaving the line out changes nothing else the rule set
	// decides (the target does not decide the packet's fate: it rewrites,
	// marks, or tells someone), so ParseOptions.SkipUnsupported may skip it.
	// A terminating target (NFQUEUE, SYNPROXY...) is never skipped: the
	// packets it would take would go on to the next rule instead.
	skippable bool
}

const (
	whyRewrite = "it rewrites the packet; xdpfw decides (accept, drop, reject, log) and never changes a packet"
	whyMark    = "it sets the kernel's packet or connection mark, which exists only in the kernel's stack, " +
		"after XDP has decided (xdpfw matches marks in OUTPUT only, as the kernel or a socket set them)"
	// whyMarkMatch and hintMarkMatch refuse -m mark and -m connmark.
	whyMarkMatch = "INPUT and FORWARD run in XDP, before the kernel makes the packet (skb) that carries a mark; " +
		"only OUTPUT (tc egress) sees one"
	hintMarkMatch = "match marks in OUTPUT (a socket's SO_MARK, or what the kernel's rules set), keep the rule in the kernel's " +
		"iptables or nftables (they see what xdpfw accepts), or match what set the mark (addresses, ports, interface)"
	hintKernel = "keep this rule in the kernel's iptables beside xdpfw (it sees what xdpfw accepts)"
	whyNAT     = "it translates addresses (the nat table): not supported yet (xdpfw issue 16)"
	hintNAT    = "keep NAT in the kernel's iptables or nftables: it acts on the packets xdpfw accepts, after xdpfw judged them by the addresses they arrive with (docs/compat.md, Tables)"
)

// refusedTargets are the iptables and ip6tables targets xdpfw refuses, with
// the reason. A -j name neither here nor supported is a user-defined chain.
var refusedTargets = map[string]refusal{
	"QUEUE": {why: "it hands the packet to a user-space program through the kernel's netfilter queue, which XDP and tc have not", hint: "decide in the rules, or keep the rule in the kernel's iptables (it sees what xdpfw accepts)"},
	"NFQUEUE": {why: "it hands the packet to a user-space program through the kernel's netfilter queue, which XDP and tc have not",
		hint: "decide in the rules, or keep the rule in the kernel's iptables (it sees what xdpfw accepts)"},
	"MASQUERADE":  {why: whyNAT, hint: hintNAT},
	"SNAT":        {why: whyNAT, hint: hintNAT},
	"DNAT":        {why: whyNAT, hint: hintNAT},
	"REDIRECT":    {why: whyNAT, hint: hintNAT},
	"NETMAP":      {why: whyNAT, hint: hintNAT},
	"DNPT":        {why: whyNAT, hint: hintNAT},
	"SNPT":        {why: whyNAT, hint: hintNAT},
	"TPROXY":      {why: "it hands the packet to a local socket (transparent proxy, mangle table); XDP cannot assign sockets", hint: hintKernel},
	"MARK":        {why: whyMark, hint: hintKernel, skippable: true},
	"CONNMARK":    {why: whyMark, hint: hintKernel, skippable: true},
	"HMARK":       {why: whyMark, hint: hintKernel, skippable: true},
	"SECMARK":     {why: "it sets a security label (SELinux) on the kernel's packet, which XDP has not", hint: hintKernel, skippable: true},
	"CONNSECMARK": {why: "it copies security labels between the kernel's packets and connections, which XDP has not", hint: hintKernel, skippable: true},
	"CT": {why: "it sets conntrack options (zone, helper, timeout) in the raw table; only -j CT --notrack has a meaning in xdpfw's conntrack, in the raw table",
		hint: "write -t raw -A PREROUTING ... -j CT --notrack, or keep the rule in the kernel's iptables", skippable: true},
	"NOTRACK": {why: "it exempts packets from conntrack: it belongs to the raw table", hint: "put it in a *raw section (PREROUTING or OUTPUT), or write -t raw -A PREROUTING ... -j NOTRACK"},
	"TRACE": {why: "it turns on the kernel's packet tracing (raw table)",
		hint: "xdpfw trace shows which rule decides a packet", skippable: true},
	"TCPMSS":      {why: "it rewrites the MSS option of TCP SYNs; xdpfw decides and never changes a packet", hint: "clamp the MSS in the kernel (iptables mangle, or `ip route ... advmss`)", skippable: true},
	"TOS":         {why: whyRewrite, hint: hintKernel, skippable: true},
	"DSCP":        {why: whyRewrite, hint: hintKernel, skippable: true},
	"TTL":         {why: whyRewrite, hint: hintKernel, skippable: true},
	"HL":          {why: whyRewrite, hint: hintKernel, skippable: true},
	"ECN":         {why: whyRewrite, hint: hintKernel, skippable: true},
	"TCPOPTSTRIP": {why: whyRewrite, hint: hintKernel, skippable: true},
	"CHECKSUM":    {why: whyRewrite, hint: hintKernel, skippable: true},
	"CLASSIFY":    {why: "it sets the kernel's packet priority for queueing disciplines, which XDP has not", hint: hintKernel, skippable: true},
	"TEE":         {why: "it clones the packet to another gateway; xdpfw does not copy packets", hint: hintKernel, skippable: true},
	"AUDIT":       {why: "it writes kernel audit records", hint: "log with -j LOG or -j NFLOG (the events go to xdpfw log)", skippable: true},
	"SET": {why: "it adds or deletes set elements from the packet path; xdpfw's sets change only from user space (xdpfw set add/del)",
		hint: hintKernel, skippable: true},
	"IDLETIMER": {why: "it drives a kernel timer file in sysfs", hint: hintKernel, skippable: true},
	"LED":       {why: "it blinks a kernel LED trigger", hint: hintKernel, skippable: true},
	"RATEEST":   {why: "it feeds the kernel's rate estimator (-m rateest), which xdpfw has not", hint: hintKernel, skippable: true},
	"SYNPROXY":  {why: "it answers SYNs with SYN cookies on the server's behalf; xdpfw does not proxy TCP", hint: "keep it in the kernel's iptables; Linux's own SYN cookies (net.ipv4.tcp_syncookies) protect the host"},
	"CLUSTERIP": {why: "it shares an address between cluster nodes (removed from Linux 6.3)", hint: "use a load balancer"},
	"MIRROR":    {why: "it sends the packet back with the addresses swapped (removed from Linux long ago)", hint: "use -j REJECT"},
}

// refusedModules are iptables match modules (-m NAME) xdpfw does not run,
// with the reason each gives: what the match reads that xdpfw has not. A
// match is never skipped (leaving it out widens the rule). A module neither
// here nor supported gets the list of the supported ones.
var refusedModules = map[string]refusal{
	"connmark": {why: "xdpfw's conntrack keeps no mark", hint: hintMarkMatch},
	"connlabel": {why: "it matches labels of the kernel's conntrack entries; xdpfw's conntrack keeps no labels",
		hint: hintKernel},
	"connbytes": {why: "it matches by the bytes or packets a connection has carried; xdpfw's conntrack does not count them",
		hint: hintKernel},
	"helper": {why: "it matches connections a conntrack helper (ftp, sip, tftp...) expected; xdpfw's conntrack has no helpers",
		hint: hintKernel},
	"policy": {why: "it matches the IPsec policy (xfrm) that decrypted the packet or will encrypt it; xdpfw judges packets as " +
		"they arrive at and leave its interfaces, where IPsec traffic is ESP or UDP 4500, and knows no IPsec policy",
		hint: "accept the IPsec packets themselves (-p esp, -p udp --dport 4500) and keep the rules about what they carry in the " +
			"kernel's iptables (it sees what xdpfw accepts)"},
	"physdev": {why: "it matches the bridge ports a bridged frame enters and leaves (br_netfilter); xdpfw's FORWARD is the " +
		"kernel's IP routing, and it does not see which bridge port the bridge picks",
		hint: hintKernel},
	"owner": {why: "it matches the user, group or process of the local socket that sent the packet; xdpfw's OUTPUT " +
		"(tc egress) does not read socket owners",
		hint: "match what the program sends (addresses, ports, or -m mark with a mark it sets: SO_MARK), or " + hintKernel},
	"cgroup": {why: "it matches the control group of the local socket that sent or receives the packet; xdpfw does not read it",
		hint: hintKernel},
	"socket": {why: "it looks up the local socket an arriving packet belongs to (transparent proxying); XDP runs before " +
		"the kernel's socket lookup", hint: hintKernel},
	"string": {why: "it searches the packet's payload for a text or byte pattern; xdpfw's classifier tests header fields, not payload",
		hint: hintKernel},
	"u32": {why: "it tests arbitrary bytes of the packet by offset and mask, which xdpfw's classifier of header fields cannot express",
		hint: "most u32 tests have a header match of their own (-m length, -p tcp --tcp-flags, -m dscp, -m ttl, -f); otherwise " + hintKernel},
	"bpf": {why: "it runs a BPF program (bytecode or a pinned program) as the match; xdpfw compiles matches into its own classifier",
		hint: hintKernel},
	"time": {why: "it matches the date and time of day; xdpfw's rules have no clock (a rule matches alike at every hour)",
		hint: "load different rule files at those times (from a timer), or " + hintKernel},
	"statistic": {why: "it matches every Nth packet or a random share of them; xdpfw keeps no per-rule packet count or random draw",
		hint: hintKernel},
	"quota": {why: "it matches until the rule has counted a number of bytes; xdpfw keeps no per-rule byte budget",
		hint: hintKernel},
	"ipvs": {why: "it matches packets of the kernel's IPVS load balancer; xdpfw does not see IPVS's connections", hint: hintKernel},
	"geoip": {why: "it is an xtables-addons match that reads its own country database",
		hint: "load the country's networks into an xdpfw set (xdpfw set create NAME hash:net; set add) and match it with -m set --match-set NAME src"},
}

// refusedOptions are options of iptables' matches that xdpfw does not
// take, with the reason: a rule with one is refused (never skipped).
var refusedOptions = map[string]refusal{
	"--ctorigsrcport": ctPortRefusal, "--ctorigdstport": ctPortRefusal,
	"--ctreplsrcport": ctPortRefusal, "--ctrepldstport": ctPortRefusal,
	"--ctexpire": {why: "xdpfw's conntrack entries do not keep the kernel's remaining lifetime", hint: hintKernel},
	"--tcp-option": {why: "it tests whether the TCP header carries an option of a kind; xdpfw reads the MSS option only (-m tcpmss)",
		hint: hintKernel},
	"--chunk-types": {why: "it tests the chunks of SCTP packets; xdpfw reads SCTP's ports only",
		hint: "match the ports (-p sctp --dport N), or " + hintKernel},
	"--return-nomatch":  {why: "it changes what a set's nomatch elements mean; xdpfw's sets have none", hint: hintKernel},
	"--update-counters": setCounterRefusal, "--update-subcounters": setCounterRefusal,
	"--packets-eq": setCounterRefusal, "--packets-lt": setCounterRefusal, "--packets-gt": setCounterRefusal,
	"--bytes-eq": setCounterRefusal, "--bytes-lt": setCounterRefusal, "--bytes-gt": setCounterRefusal,
}

var (
	ctPortRefusal = refusal{why: "xdpfw's classifier tests the packet's own ports, not those its connection had in one direction",
		hint: "test the packet's ports (-p tcp --dport N) with -m conntrack --ctdir ORIGINAL or REPLY, or " + hintKernel}
	setCounterRefusal = refusal{why: "it reads or updates the packet and byte counters of set elements, which xdpfw's sets do not keep",
		hint: hintKernel}
)

// refusedTables are the iptables tables xdpfw cannot load, with the reason.
// filter is what xdpfw is; raw's NOTRACK is refused per rule.
var refusedTables = map[string]refusal{
	"nat": {why: "the nat table is the kernel's unless xdpfw loads it (load --nat xdpfw: docs/nat.md)",
		hint: "keep NAT in the kernel's iptables or nftables: it acts on the packets xdpfw accepts, after xdpfw judged them by the addresses they arrive with (docs/compat.md, Tables)", skippable: true},
	"mangle": {why: "the mangle table rewrites and marks packets in the kernel's stack (TTL, DSCP, MSS, marks); " +
		"xdpfw decides and never changes a packet, and XDP has no packet mark",
		hint: "keep the mangle table in the kernel's iptables (it sees the packets xdpfw accepts)", skippable: true},
	"security": {why: "the security table sets SELinux labels (SECMARK, CONNSECMARK) on the kernel's packets, which XDP has not",
		hint: "keep the security table in the kernel's iptables", skippable: true},
	"raw": {why: "the raw table's targets other than -j NOTRACK and -j CT --notrack set the kernel's conntrack options",
		hint: "keep the rule in the kernel's iptables", skippable: true},
}

// isIptablesTarget reports whether name is a target of iptables/ip6tables
// that xdpfw does not run, as opposed to a user-defined chain.
func isIptablesTarget(name string) bool {
	_, ok := refusedTargets[name]
	return ok
}
