package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseErrors checks every error: its exact position, the quoted token,
// and substrings of the message and the hint. Each source has one bad line.
func TestParseErrors(t *testing.T) {
	v4, v6 := ParseOptions{Family: FamilyIPv4}, ParseOptions{Family: FamilyIPv6}
	tests := []struct {
		src      string
		opt      ParseOptions
		pos      string // line:col
		tok      string // Error.Token, exactly
		msg      string // substring of Error.Msg
		hintPart string // substring of Error.Hint
	}{
		{"-A INPUT -m comment --comment \"abc -j ACCEPT", ParseOptions{}, "1:31", "", "unterminated double quote", ""},
		{"-A INPUT -m comment --comment 'abc -j ACCEPT", ParseOptions{}, "1:31", "", "unterminated single quote", ""},
		{"*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j DNAT --to 1.2.3.4\nCOMMIT\n", v4, "1:1", "", "table nat is not supported: the nat table is the kernel's unless xdpfw loads it (load --nat xdpfw: docs/nat.md) (this section has rules: line 3)", "--skip-unsupported"},
		{"*filter\nCOMMIT\n*mangle\n-A PREROUTING -j MARK\n-A PREROUTING -j MARK\nCOMMIT\n", v4, "3:1", "", "this section has rules: 2 lines, from line 4", "keep the mangle table"},
		{"*mangle\n:PREROUTING DROP [0:0]\nCOMMIT\n", v4, "1:1", "", "table mangle is not supported", ""},
		{"*security\n:INPUT ACCEPT [0:0]\n-A INPUT -j SECMARK --selctx x\n", v6, "1:1", "", "table security has no COMMIT", ""},
		{"*foo\nCOMMIT\n", v4, "1:1", "", "unknown table foo", ""},
		{"-t nat -A POSTROUTING -j MASQUERADE", ParseOptions{}, "1:4", "nat", "table nat is not supported", "--skip-unsupported"},
		{"-A INPUT -j TCPMSS --clamp-mss-to-pmtu", ParseOptions{}, "1:13", "TCPMSS", "target TCPMSS is not supported: it rewrites the MSS", "--skip-unsupported"},
		{"-A INPUT -j NFQUEUE --queue-num 1", ParseOptions{}, "1:13", "NFQUEUE", "target NFQUEUE is not supported: it hands the packet", "decide in the rules"},
		{"-A INPUT -j NFLOG --log-prefix x", ParseOptions{}, "1:19", "", "--log-prefix is an option of -j LOG, not of -j NFLOG", "--nflog-prefix"},
		{"-A INPUT -j LOG --nflog-group 2", ParseOptions{}, "1:17", "", "--nflog-group is an option of -j NFLOG, not of -j LOG", ""},
		{"-A INPUT -j NFLOG --ulog-nlgroup 2", ParseOptions{}, "1:19", "", "--ulog-nlgroup is an option of -j ULOG, not of -j NFLOG", ""},
		{"-A INPUT -j ULOG --ulog-nlgroup 33", ParseOptions{}, "1:33", "33", "bad --ulog-nlgroup", "1 to 32"},
		{"-A INPUT -j NFLOG --nflog-group 65536", ParseOptions{}, "1:33", "65536", "bad --nflog-group", "0 to 65535"},
		{"-A INPUT --nflog-group 1 -j NFLOG", ParseOptions{}, "1:10", "", "--nflog-group needs -j NFLOG before it", ""},
		{"-A INPUT -j NFLOG --nflog-prefix " + strings.Repeat("x", 64), ParseOptions{}, "1:34", strings.Repeat("x", 64), "log prefix too long (64 > 63", ""},
		{"*filter\n-A INPUT -j ACCEPT\n", v4, "1:1", "", "table filter has no COMMIT", "truncated"},
		{"COMMIT\n", ParseOptions{}, "1:1", "", "COMMIT without a table", ""},
		{"*filter\n*filter\nCOMMIT\n", v4, "2:1", "", "table filter starts before the COMMIT of table filter (line 1)", ""},
		{"*filter x\nCOMMIT\n", v4, "1:9", "x", "unexpected text after the table name", ""},
		{"*filter\nCOMMIT now\n", v4, "2:8", "now", "unexpected text after COMMIT", ""},
		{"-A INPUT -j ACCEPT\n-I INPUT 3 -j ACCEPT", ParseOptions{}, "2:10", "3", "index of insertion too big: INPUT has 1 rules at this line", "1 to 2"},
		{"-I INPUT 0 -j ACCEPT", ParseOptions{}, "1:10", "0", "invalid rule number", "numbered from 1"},
		{"-D INPUT -j ACCEPT", ParseOptions{}, "1:1", "", `no rule of INPUT is "-j ACCEPT": nothing to delete`, "as in iptables-restore"},
		{"-A INPUT -s 10.0.0.1 -j DROP\n-D INPUT -s 10.0.0.1 -p tcp -j DROP", ParseOptions{}, "2:1", "", `no rule of INPUT is "-s 10.0.0.1/32 -p tcp -j DROP"`, ""},
		{"-A INPUT -j DROP\n-D INPUT 2", ParseOptions{}, "2:10", "2", "index of deletion too big: INPUT has 1 rules at this line", ""},
		{"-A INPUT -j DROP\n-D INPUT 1 -j DROP", ParseOptions{}, "2:12", "-j", "-D INPUT N takes no rule after the number", ""},
		{"-D INPUT", ParseOptions{}, "1:1", "", "-D needs a rule number or a rule", ""},
		{"-R INPUT 1 -j ACCEPT", ParseOptions{}, "1:10", "1", "index of replacement too big: INPUT has 0 rules", ""},
		{"-R INPUT -j ACCEPT", ParseOptions{}, "1:1", "", "-R needs a rule number", ""},
		{"-N", ParseOptions{}, "1:1", "", "-N needs a chain name", ""},
		{"-N MYCHAIN\n-N MYCHAIN", ParseOptions{}, "2:4", "MYCHAIN", "chain MYCHAIN already exists", "line 1"},
		{"-N INPUT", ParseOptions{}, "1:4", "INPUT", "INPUT is a built-in chain", ""},
		{"-N DROP", ParseOptions{}, "1:4", "DROP", "DROP is a target, not a chain name", ""},
		{"-N abcdefghijklmnopqrstuvwxyz123", ParseOptions{}, "1:4", "abcdefghijklmnopqrstuvwxyz123", "chain name longer than 28 characters", ""},
		{"-X MYCHAIN", ParseOptions{}, "1:4", "MYCHAIN", "no chain MYCHAIN to delete", ""},
		{"-N A\n-A A -j DROP\n-X A", ParseOptions{}, "3:4", "A", "chain A is not empty (1 rules)", ""},
		{"-N A\n-A INPUT -j A\n-X A", ParseOptions{}, "3:4", "A", "chain A is still in use: the rule -A INPUT -j A jumps to it", ""},
		{"-F NOPE", ParseOptions{}, "1:4", "NOPE", "no chain NOPE to flush", ""},
		{"-Z", ParseOptions{}, "1:1", "", "a rule file holds -A, -I, -D, -R, -P, -N, -X and -F lines", "nothing to zero"},
		{"*filter\n:INPUT DROP [0:0]\n:MYCHAIN DROP [0:0]\nCOMMIT\n", v4, "3:2", "MYCHAIN", "only built-in chains have a policy", ":MYCHAIN - [0:0]"},
		{"*filter\n:INPUT - [0:0]\nCOMMIT\n", v4, "2:8", "", "built-in chain INPUT needs a policy", ""},
		{"*filter\n:A - [0:0]\n-A INPUT -j B\nCOMMIT\n", v4, "3:13", "B", "no chain or target B", ":B - [0:0]"},
		{"*filter\n-A INPUT -j A\n:A - [0:0]\nCOMMIT\n", v4, "2:13", "A", "no chain or target A", "declare the chain before the rule"},
		{"*filter\n:INPUT DROP [0:x]\nCOMMIT\n", v4, "2:13", "[0:x]", "not a counter [PACKETS:BYTES]", ""},
		{"*filter\n:INPUT\nCOMMIT\n", v4, "2:1", "", "chain INPUT needs a policy", ""},
		{"-A MYCHAIN -j ACCEPT", ParseOptions{}, "1:4", "MYCHAIN", "no chain MYCHAIN", "-N MYCHAIN"},
		{"-A input -j ACCEPT", ParseOptions{}, "1:4", "input", "unknown chain", "chain names are upper case: INPUT"},
		{"-A PREROUTING -j ACCEPT", ParseOptions{}, "1:4", "PREROUTING", "chain PREROUTING is not in the filter table", "-t raw -A PREROUTING"},
		{"-A", ParseOptions{}, "1:1", "", "-A needs a chain", ""},
		{"-P INPUT REJECT", ParseOptions{}, "1:10", "REJECT", "a policy must be ACCEPT or DROP", ""},
		{"-P INPUT", ParseOptions{}, "1:1", "", "-P needs a chain and a policy", ""},
		{"-P FOO DROP", ParseOptions{}, "1:4", "FOO", "only built-in chains have a policy", ""},
		{"-P INPUT DROP -4 -6", ParseOptions{}, "1:18", "", "family given twice", ""},
		{"-P INPUT DROP now", ParseOptions{}, "1:15", "now", "unexpected text after the policy", ""},
		{"[1:2]", ParseOptions{}, "1:1", "", "counters [PACKETS:BYTES] must be followed by -A", ""},
		{"[x] -A INPUT -j DROP", ParseOptions{}, "1:1", "[x]", "not a counter [PACKETS:BYTES]", ""},
		{"iptables -A INPUT -j DROP", ParseOptions{}, "1:1", "iptables", "not commands", "leave out the command name"},
		{"hello world", ParseOptions{}, "1:1", "hello", "expected -A, -I, -D, -R, -P, -N, -X, -F or an iptables-save line", ""},
		{"-A INPUT -s ! 10.0.0.1 -j DROP", ParseOptions{}, "1:13", "", "! must come before -s, not after it", "write ! -s 10.0.0.1"},
		{"-A INPUT -p tcp --dport ! 22 -j DROP", ParseOptions{}, "1:25", "", "! must come before --dport", "write ! --dport 22"},
		{"-A INPUT -j DROP !", ParseOptions{}, "1:18", "", "! must be followed by an option", ""},
		{"-A INPUT ! ! -p tcp -j DROP", ParseOptions{}, "1:12", "", "! given twice", ""},
		{"-A INPUT ! -j DROP", ParseOptions{}, "1:12", "", "-j cannot be negated", ""},
		{"-A INPUT ! -m mac --mac-source 0:0:0:0:0:0 -j DROP", ParseOptions{}, "1:12", "", "-m cannot be negated", ""},
		{"-A INPUT -m comment ! --comment x -j DROP", ParseOptions{}, "1:23", "", "--comment cannot be negated", ""},
		{"-A INPUT ! -p all -j DROP", ParseOptions{}, "1:15", "all", "! -p all matches nothing", ""},
		{"-A INPUT -p foo -j DROP", ParseOptions{}, "1:13", "foo", "unknown protocol", "a number 0-255"},
		{"-A INPUT -p 256 -j DROP", ParseOptions{}, "1:13", "256", "unknown protocol", ""},
		{"-A INPUT -p -j DROP", ParseOptions{}, "1:10", "", "-p needs an argument", "write -p PROTOCOL"},
		{"-A INPUT -p", ParseOptions{}, "1:10", "", "-p needs an argument", ""},
		{"-A INPUT -s 300.1.1.1 -j DROP", ParseOptions{}, "1:13", "300.1.1.1", "not an IPv4 address", ""},
		{"-A INPUT -d 2001:db8::zz -j DROP", ParseOptions{}, "1:13", "2001:db8::zz", "not an IPv6 address", ""},
		{"-A INPUT -s example.com -j DROP", ParseOptions{}, "1:13", "example.com", "not an IPv4 address", "host names are not resolved"},
		{"-A INPUT -s 10.0.0.0/33 -j DROP", ParseOptions{}, "1:22", "33", "prefix length out of range (0-32)", ""},
		{"-A INPUT -s 2001:db8::/129 -j DROP", ParseOptions{}, "1:24", "129", "prefix length out of range (0-128)", ""},
		{"-A INPUT -s 10.0.0.0/255.0.255.0 -j DROP", ParseOptions{}, "1:22", "255.0.255.0", "netmask is not contiguous", ""},
		{"-A INPUT -s 10.0.0.0/x -j DROP", ParseOptions{}, "1:22", "x", "not a prefix length", ""},
		{"-A INPUT -s 10.0.0.1,10.0.0.2 -j DROP", ParseOptions{}, "1:21", "10.0.0.1,10.0.0.2", "only one address per option", ""},
		{"-A INPUT -s fe80::1%eth0 -j DROP", ParseOptions{}, "1:13", "fe80::1%eth0", "not an IPv6 address", "zones"},
		{"-A INPUT -s \"300.1.1.1\" -j DROP", ParseOptions{}, "1:13", "300.1.1.1", "not an IPv4 address", ""},
		{"-A INPUT -p tcp --dport 70000 -j DROP", ParseOptions{}, "1:25", "70000", "port out of range (0-65535)", ""},
		{"-A INPUT -p tcp --sport 1:70000 -j DROP", ParseOptions{}, "1:27", "70000", "port out of range (0-65535)", ""},
		{"-A INPUT -p tcp --dport 200:100 -j DROP", ParseOptions{}, "1:25", "200:100", "port range reversed (200 > 100)", "write 100:200"},
		{"-A INPUT -p tcp --dport nosuchservice -j DROP", ParseOptions{}, "1:25", "nosuchservice", "unknown port name", "/etc/services"},
		{"-A INPUT -p tcp --dport 1:2:3 -j DROP", ParseOptions{}, "1:27", "2:3", "unknown port name", ""},
		{"-A INPUT -p udp -m multiport --dports 53,ssh -j DROP", ParseOptions{}, "1:42", "ssh", "unknown port name", "for udp"},
		{"-A INPUT -p nosuchproto -j DROP", ParseOptions{}, "1:13", "nosuchproto", "unknown protocol", "/etc/protocols"},
		{"-A INPUT --dport 22 -j DROP", ParseOptions{}, "1:10", "", "--dport needs -p tcp or -p udp", ""},
		{"-A INPUT --sport 22 -p icmp -j DROP", ParseOptions{}, "1:10", "", "--sport needs -p tcp or -p udp", ""},
		{"-A INPUT ! -p tcp --dport 22 -j DROP", ParseOptions{}, "1:19", "", "--dport needs -p tcp or -p udp", ""},
		{"-A INPUT -p all --destination-port 22 -j DROP", ParseOptions{}, "1:17", "", "--destination-port needs -p tcp or -p udp", ""},
		{"-A INPUT -m multiport --dports 22,80 -j DROP", ParseOptions{}, "1:23", "", "--dports needs -p tcp or -p udp", ""},
		{"-A INPUT -p tcp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 -j DROP", ParseOptions{}, "1:39", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", "too many ports (16 > 15; a range counts as two)", ""},
		{"-A INPUT -p tcp -m multiport --ports 1:2,3:4,5:6,7:8,9:10,11:12,13:14,15:16 -j DROP", ParseOptions{}, "1:38", "1:2,3:4,5:6,7:8,9:10,11:12,13:14,15:16", "too many ports (16 > 15", ""},
		{"-A INPUT -p tcp -m multiport --dports 22,,80 -j DROP", ParseOptions{}, "1:42", "", "missing port number", ""},
		{"-A INPUT -p tcp --dport 22 --destination-port 23 -j DROP", ParseOptions{}, "1:28", "", "--dport and --destination-port both given", ""},
		{"-A INPUT -p tcp -m multiport --sports 1,2 --source-ports 3 -j DROP", ParseOptions{}, "1:43", "", "--sports and --source-ports both given", ""},
		{"-A INPUT -p tcp --dport 1:1000 -m multiport ! --dports 10,20,30,40,50,60,70,80,90,100,110,120,130,140,150 -j DROP", ParseOptions{}, "1:56", "10,20,30,40,50,60,70,80,90,100,110,120,130,140,150", "need 18 -m multiport entries", "iptables tests both"},
		{"-A INPUT -p tcp --dports 80,443 -j DROP", ParseOptions{}, "1:17", "", "--dports needs -m multiport before it", ""},
		{"-A INPUT -p tcp -m multiport -j DROP", ParseOptions{}, "1:17", "", "-m multiport needs --sports, --dports or --ports", ""},
		{"-A INPUT -i abcdefghijklmnop -j DROP", ParseOptions{}, "1:13", "abcdefghijklmnop", "interface name too long (16 > 15 characters)", ""},
		{"-A INPUT -i eth/0 -j DROP", ParseOptions{}, "1:16", "eth/0", "invalid character '/' in interface name", ""},
		{"-A INPUT -i \"\" -j DROP", ParseOptions{}, "1:13", "", "not an interface name", ""},
		{"-A INPUT -o eth0 -j DROP", ParseOptions{}, "1:10", "", "-o cannot be used in the INPUT chain", "no output interface"},
		{"-A INPUT ! --out-interface eth0 -j DROP", ParseOptions{}, "1:12", "", "--out-interface cannot be used in the INPUT chain", ""},
		{"-A INPUT -m pkttype --pkt-type anycast -j DROP", ParseOptions{}, "1:32", "anycast", "unknown packet type", "unicast, broadcast, multicast and otherhost"},
		{"-A INPUT -m pkttype -j DROP", ParseOptions{}, "1:10", "", "-m pkttype needs --pkt-type", ""},
		{"-A INPUT --pkt-type unicast -j DROP", ParseOptions{}, "1:10", "", "--pkt-type needs -m pkttype before it", ""},
		{"-A INPUT -m addrtype --dst-type LOCAL,FOO -j DROP", ParseOptions{}, "1:39", "FOO", "unknown address type", "UNSPEC, UNICAST, LOCAL"},
		{"-A INPUT -m addrtype --limit-iface-in -j DROP", ParseOptions{}, "1:10", "", "-m addrtype needs --src-type or --dst-type", ""},
		{"-A INPUT -m addrtype --dst-type LOCAL --limit-iface-out -j DROP", ParseOptions{}, "1:39", "", "--limit-iface-out cannot be used in the INPUT chain", "no output interface"},
		{"-A OUTPUT -m addrtype --dst-type LOCAL --limit-iface-in -j DROP", ParseOptions{}, "1:40", "", "--limit-iface-in cannot be used in the OUTPUT chain", ""},
		{"-A FORWARD -m addrtype --dst-type LOCAL --limit-iface-in --limit-iface-out -j DROP", ParseOptions{}, "1:58", "", "--limit-iface-in and --limit-iface-out both given", ""},
		{"-A INPUT -6 -m addrtype --dst-type BROADCAST -j DROP", ParseOptions{}, "1:36", "BROADCAST", "conflicts with -6", "IPv6 has no such addresses"},
		{"-A INPUT -m addrtype --dst-type UNREACHABLE -j DROP", ParseOptions{}, "1:10", "", "UNREACHABLE is supported in IPv4 rules only", "add -4"},
		{"-A INPUT -s ::1 -m addrtype --dst-type UNREACHABLE -j DROP", ParseOptions{}, "1:17", "", "UNREACHABLE is supported in IPv4 rules only", ""},
		{"-A FORWARD -o eth/0 -j DROP", ParseOptions{}, "1:18", "eth/0", "invalid character '/' in interface name", ""},
		{"-A FORWARD -o eth0 --out-interface eth1 -j DROP", ParseOptions{}, "1:20", "", "-o and --out-interface both given", ""},
		{"-A OUTPUT -i eth0 -j DROP", ParseOptions{}, "1:11", "", "-i cannot be used in the OUTPUT chain", ""},
		{"-A INPUT --mac-source 00:11:22:33:44:55 -j DROP", ParseOptions{}, "1:10", "", "--mac-source needs -m mac before it", "write -m mac --mac-source"},
		{"-A INPUT -m mac --mac-source 00:11:22:33:44 -j DROP", ParseOptions{}, "1:30", "00:11:22:33:44", "not a MAC address", "XX:XX:XX:XX:XX:XX"},
		{"-A INPUT -m mac --mac-destination 00:11:22:33:44:5g -j DROP", ParseOptions{}, "1:35", "00:11:22:33:44:5g", "not a MAC address", ""},
		{"-A INPUT -m mac --mac-source 000:11:22:33:44:55 -j DROP", ParseOptions{}, "1:30", "000:11:22:33:44:55", "not a MAC address", ""},
		{"-A INPUT -m mac -j DROP", ParseOptions{}, "1:10", "", "-m mac needs --mac-source or --mac-destination", ""},
		{"-A INPUT -p tcp --tcp-flags SYN -j DROP", ParseOptions{}, "1:17", "", "--tcp-flags needs 2 arguments", "MASK COMP"},
		{"-A INPUT -p tcp --tcp-flags SYN,FOO SYN -j DROP", ParseOptions{}, "1:33", "FOO", "unknown TCP flag", ""},
		{"-A INPUT -p tcp --tcp-flags SYN ECE -j DROP", ParseOptions{}, "1:33", "ECE", "unknown TCP flag", ""},
		{"-A INPUT --syn -j DROP", ParseOptions{}, "1:10", "", "--syn needs -p tcp", ""},
		{"-A INPUT -p udp --tcp-flags ALL NONE -j DROP", ParseOptions{}, "1:17", "", "--tcp-flags needs -p tcp", ""},
		{"-A INPUT -p tcp --syn --tcp-flags ALL SYN -j DROP", ParseOptions{}, "1:23", "", "--syn and --tcp-flags both given", ""},
		{"-A INPUT --icmp-type 8 -j DROP", ParseOptions{}, "1:10", "", "--icmp-type needs -p icmp", "add -p icmp"},
		{"-A INPUT -p tcp --icmp-type echo-request -j DROP", ParseOptions{}, "1:17", "", "--icmp-type needs -p icmp", ""},
		{"-A INPUT -p icmp --icmp-type foo -j DROP", ParseOptions{}, "1:30", "foo", "unknown ICMP type", "iptables -p icmp -h"},
		{"-A INPUT -p icmp --icmp-type neighbour-solicitation -j DROP", ParseOptions{}, "1:30", "neighbour-solicitation", "unknown ICMP type", ""},
		{"-A INPUT -p icmp --icmp-type 256 -j DROP", ParseOptions{}, "1:30", "256", "--icmp-type type out of range (0-255)", ""},
		{"-A INPUT -p icmp --icmp-type 3/256 -j DROP", ParseOptions{}, "1:32", "256", "--icmp-type code out of range (0-255)", ""},
		{"-A INPUT -p icmp --icmp-type 3/x -j DROP", ParseOptions{}, "1:32", "x", "not an ICMP code", ""},
		{"-A INPUT -p ipv6-icmp --icmp-type 8 -j DROP", ParseOptions{}, "1:23", "", "--icmp-type needs -p icmp", ""},
		{"-A INPUT -p icmp --icmpv6-type 128 -j DROP", ParseOptions{}, "1:18", "", "--icmpv6-type needs -p ipv6-icmp", ""},
		{"-A INPUT -p ipv6-icmp --icmpv6-type ping-pong -j DROP", ParseOptions{}, "1:37", "ping-pong", "unknown ICMPv6 type", "ip6tables"},
		{"-A INPUT -p ipv6-icmp --icmpv6-type 128 --icmp-type 8 -j DROP", ParseOptions{}, "1:41", "", "--icmpv6-type and --icmp-type both given", ""},
		{"-A INPUT ! -p icmp --icmp-type 8 -j DROP", ParseOptions{}, "1:20", "", "--icmp-type needs -p icmp", ""},
		{"-A INPUT -m vlan --vlan-id 4096 -j DROP", ParseOptions{}, "1:28", "4096", "not a VLAN id (0-4095)", ""},
		{"-A INPUT --vlan-id 5 -j DROP", ParseOptions{}, "1:10", "", "--vlan-id needs -m vlan before it", ""},
		{"-A INPUT -m vlan --vlan-prio 8 -j DROP", ParseOptions{}, "1:30", "8", "not a VLAN priority (PCP, 0-7)", ""},
		{"-A INPUT --vlan-prio 5 -j DROP", ParseOptions{}, "1:10", "", "--vlan-prio needs -m vlan before it", ""},
		{"-A INPUT -m vlan --vlan-pri 5 -j DROP", ParseOptions{}, "1:18", "--vlan-pri", "unknown option", ""}, // full names only
		{"-A INPUT -6 -f -j DROP", ParseOptions{}, "1:13", "", "-f (IPv4 fragments) conflicts with -6", ""},
		{"-A INPUT -f -j DROP", v6, "1:10", "", "-f (IPv4 fragments) conflicts with the default family (IPv6)", ""},
		{"-A INPUT -m comment --comment \"a\tb\" -j DROP", ParseOptions{}, "1:31", "a\tb", "control character", ""},
		{"-A INPUT -m comment --comment xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx -j DROP", ParseOptions{}, "1:31", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "comment too long (256 > 255 characters)", ""},
		{"-A INPUT --comment x -j DROP", ParseOptions{}, "1:10", "", "--comment needs -m comment before it", ""},
		{"-A INPUT -m comment -j DROP", ParseOptions{}, "1:10", "", "-m comment needs --comment", ""},
		{"-A INPUT -m comment --comment -j DROP", ParseOptions{}, "1:21", "", "--comment needs an argument", ""},
		{"-A INPUT -m comment --comment a --comment b -j DROP", ParseOptions{}, "1:33", "", "--comment given twice for one -m comment", "its own -m comment"},
		// long options abbreviated as iptables reads them (getopt_long over
		// the options of the extensions loaded so far)
		{"-A INPUT -m conntrack --ctst NEW -j DROP", ParseOptions{}, "1:23", "--ctst", "ambiguous option: it abbreviates --ctstate, --ctstatus", "write the option in full"},
		{"-A INPUT --in eth0 -j DROP", ParseOptions{}, "1:10", "--in", "ambiguous option: it abbreviates --in-interface, --insert", ""},
		{"-A INPUT -p tcp -m multiport --sports 1,2 --dport 3 -j DROP", ParseOptions{}, "1:43", "", "--sports and --dports both given to one -m multiport", "write -m multiport --dports ... again"},
		{"-A INPUT -p tcp -m multiport --dports 1 --dport 2 -j DROP", ParseOptions{}, "1:41", "", "--dports given twice", ""},
		{"-A INPUT -m comment -m comment --comment a --comment b -j DROP", ParseOptions{}, "1:10", "", "-m comment needs --comment", ""},
		{"-A INPUT -m comment --comment a -m comment -j DROP", ParseOptions{}, "1:33", "", "-m comment needs --comment", ""},
		{"-A INPUT -m conntrack --ctstate ESTABLISHED,BOGUS -j ACCEPT", ParseOptions{}, "1:45", "BOGUS", "unknown connection state", "states are NEW, ESTABLISHED, RELATED, INVALID, UNTRACKED, SNAT and DNAT, separated by commas"},
		// an empty name is no state (FuzzParse: it read as none at all)
		{"-A INPUT -m conntrack --ctstate ,NEW -j ACCEPT", ParseOptions{}, "1:33", "", "unknown connection state", "states are NEW, ESTABLISHED, RELATED, INVALID, UNTRACKED, SNAT and DNAT, separated by commas"},
		{"-A INPUT -m conntrack --ctstatus ASSURED, -j ACCEPT", ParseOptions{}, "1:42", "", "unknown connection status", "statuses are NONE, EXPECTED, SEEN_REPLY, ASSURED and CONFIRMED, separated by commas"},
		{"-A INPUT -m state --state DNAT -j ACCEPT", ParseOptions{}, "1:27", "DNAT", "-m state has no DNAT", "-m conntrack --ctstate DNAT"},
		{"-A INPUT --ctstate NEW -j ACCEPT", ParseOptions{}, "1:10", "", "--ctstate needs -m conntrack before it", ""},
		{"-A INPUT -m conntrack -j ACCEPT", ParseOptions{}, "1:10", "", "-m conntrack needs --ctstate, --ctproto, --ctorigsrc, --ctorigdst, --ctreplsrc, --ctrepldst, --ctstatus or --ctdir", ""},
		{"-A INPUT -m conntrack --ctstate NEW --ctstate INVALID -j ACCEPT", ParseOptions{}, "1:37", "", "given twice", ""},
		{"-A INPUT -m limit --limit 10001/s -j ACCEPT", ParseOptions{}, "1:27", "10001/s", "rate too fast", "at most 10000/sec"},
		{"-A INPUT -m limit --limit 0/s -j ACCEPT", ParseOptions{}, "1:27", "0", "bad rate", ""},
		{"-A INPUT -m limit --limit 5/x -j ACCEPT", ParseOptions{}, "1:29", "x", "unknown rate unit", ""},
		{"-A INPUT -m limit --limit 5/ -j ACCEPT", ParseOptions{}, "1:29", "", "unknown rate unit", ""},
		{"-A INPUT -m limit --limit-burst 0 -j ACCEPT", ParseOptions{}, "1:33", "0", "--limit-burst 0 lets no packet through", "iptables-nft reads it as 5"},
		{"-A INPUT -m limit --limit-burst 10001 -j ACCEPT", ParseOptions{}, "1:33", "10001", "bad --limit-burst", "1 to 10000"},
		{"-A INPUT -m limit ! --limit 1/s -j ACCEPT", ParseOptions{}, "1:21", "", "--limit cannot be negated", ""},
		{"-A INPUT --limit 1/s -j ACCEPT", ParseOptions{}, "1:10", "", "--limit needs -m limit before it", ""},
		{"-A INPUT -m limit -m limit -j ACCEPT", ParseOptions{}, "1:19", "", "-m limit given twice", "one bucket per rule"},
		{"-A INPUT -m limit --limit 1/s --limit 2/s -j ACCEPT", ParseOptions{}, "1:31", "", "--limit given twice", ""},
		{"-A INPUT -p tcp -m limit --limit 1/s --dport 22 -j ACCEPT", ParseOptions{}, "1:38", "", "--dport after -m limit", "write -m limit after"},
		{"-A INPUT -m limit -m conntrack --ctstate NEW -j ACCEPT", ParseOptions{}, "1:19", "", "-m conntrack after -m limit", ""},
		{"-A INPUT -p tcp -m limit --syn -j ACCEPT", ParseOptions{}, "1:26", "", "--syn after -m limit", ""},
		{"-A INPUT -m limit --limit 1/s -j LOG --log-burst 3", ParseOptions{}, "1:10", "", "-m limit and --log-rate/--log-burst both given", ""},
		{"-A INPUT -m hashlimit --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:10", "", "-m hashlimit needs --hashlimit-upto or --hashlimit-above", ""},
		{"-A INPUT -p tcp -m connlimit --connlimit-mask 24 -j DROP", ParseOptions{}, "1:17", "", "-m connlimit needs --connlimit-above or --connlimit-upto", ""},
		{"-A INPUT -m connlimit --connlimit-above x -j DROP", ParseOptions{}, "1:41", "x", "bad --connlimit-above", ""},
		{"-A INPUT -m connlimit --connlimit-upto 4294967296 -j DROP", ParseOptions{}, "1:40", "4294967296", "bad --connlimit-upto", ""},
		{"-A INPUT -m connlimit --connlimit-above 1 --connlimit-mask 129 -j DROP", ParseOptions{}, "1:60", "129", "bad --connlimit-mask", ""},
		{"-A INPUT -m connlimit --connlimit-above 1 --connlimit-mask 64 -j DROP", ParseOptions{Family: FamilyIPv4}, "1:60", "64", "conflicts with the default family", ""},
		{"-A INPUT -m connlimit --connlimit-above 1 --connlimit-upto 2 -j DROP", ParseOptions{}, "1:43", "", "", ""},
		{"-A INPUT -m connlimit --connlimit-above 1 --connlimit-saddr --connlimit-daddr -j DROP", ParseOptions{}, "1:61", "", "", ""},
		{"-A INPUT -m connlimit --connlimit-above 1 ! --connlimit-mask 24 -j DROP", ParseOptions{}, "1:45", "", "", ""},
		{"-A INPUT -m connlimit --connlimit-above 1 -m tcp -p tcp --dport 1 -j DROP", ParseOptions{}, "1:43", "", "-m tcp after -m connlimit", "write -m connlimit after"},
		{"-A INPUT -m connlimit --connlimit-above 1 -m hashlimit --hashlimit-upto 1/s --hashlimit-name a -j DROP", ParseOptions{}, "1:43", "", "-m hashlimit beside -m connlimit", ""},
		{"-A INPUT -m connlimit --connlimit-above 1 -j RETURN", ParseOptions{}, "1:10", "", "-m connlimit on a rule with -j RETURN is not supported yet", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s -j ACCEPT", ParseOptions{}, "1:10", "", "-m hashlimit needs --hashlimit-name", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1kb/s --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:40", "1kb/s", "byte rates are not supported", "counts packets"},
		{"-A INPUT -m hashlimit --hashlimit-upto 1000001/sec --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:40", "1000001/sec", "rate too fast", "at most 1000000/sec"},
		{"-A INPUT -m hashlimit --hashlimit-upto 0/sec --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:40", "0", "bad rate", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 3/fortnight --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:42", "fortnight", "unknown rate unit", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-above 2/s --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:44", "", "--hashlimit-upto and --hashlimit-above both given", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-burst 1000001 --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:62", "1000001", "bad --hashlimit-burst", "1 to 1000000"},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-mode srcip,dstmac --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:67", "dstmac", "unknown --hashlimit-mode field", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-srcmask 129 --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:64", "129", "bad --hashlimit-srcmask", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-srcmask 33 --hashlimit-name a -j ACCEPT", ParseOptions{Family: FamilyIPv4}, "1:64", "33", "conflicts with the default family", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-htable-expire 0 --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:70", "0", "bad --hashlimit-htable-expire", "at least 1"},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-rate-match --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:44", "", "--hashlimit-rate-match is not supported", ""},
		{"-A INPUT -p tcp -m hashlimit --hashlimit-upto 1/s --hashlimit-name a --dport 22 -j ACCEPT", ParseOptions{}, "1:70", "", "--dport after -m hashlimit", "write -m hashlimit after"},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-name a -m limit -j ACCEPT", ParseOptions{}, "1:63", "", "-m limit beside -m hashlimit", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-name a -m hashlimit -j ACCEPT", ParseOptions{}, "1:63", "", "-m hashlimit given twice", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/s --hashlimit-name a -j RETURN", ParseOptions{}, "1:10", "", "-m hashlimit on a rule with -j RETURN is not supported yet", ""},
		{"-A INPUT -m hashlimit --hashlimit-upto 1/day --hashlimit-burst 1000000 --hashlimit-name a -j ACCEPT", ParseOptions{}, "1:10", "", "--hashlimit-burst too large for this rate", ""},
		{"-A INPUT -m recent -j DROP", ParseOptions{}, "1:10", "", "-m recent needs --set, --rcheck, --update or --remove", ""},
		{"-A INPUT -m recent --set --rcheck -j DROP", ParseOptions{}, "1:26", "", "--set and --rcheck both given", ""},
		{"-A INPUT -m recent --set --seconds 10 -j DROP", ParseOptions{}, "1:10", "", "--set takes no --seconds or --hitcount", ""},
		{"-A INPUT -m recent --rcheck --seconds 0 -j DROP", ParseOptions{}, "1:39", "0", "bad --seconds", ""},
		{"-A INPUT -m recent --rcheck --hitcount 33 -j DROP", ParseOptions{}, "1:40", "33", "bad --hitcount", "1 to 32"},
		{"-A INPUT -m recent --rcheck --seconds 9 --reap -j DROP", ParseOptions{}, "1:41", "", "--reap is not supported", "LRU"},
		{"-A INPUT -m recent --set --rttl -j DROP", ParseOptions{}, "1:10", "", "--rttl cannot be used together with --set", "--rcheck and --update"},
		{"-A INPUT -m recent --rttl --remove -j DROP", ParseOptions{}, "1:10", "", "--rttl cannot be used together with --remove", ""},
		{"-A INPUT -m recent --set --name a/b -j DROP", ParseOptions{}, "1:33", "a/b", "bad --name", ""},
		{"-A INPUT -m recent --set --mask 24 -j DROP", ParseOptions{}, "1:33", "24", "bad --mask", ""},
		{"-A INPUT -m recent --set --rsource --rdest -j DROP", ParseOptions{}, "1:36", "", "--rsource and --rdest both given", ""},
		{"-A INPUT -m recent --set -p tcp --dport 22 -j DROP", ParseOptions{}, "1:33", "", "--dport after -m recent", "write -m recent after"},
		{"-A INPUT -m recent --set -m limit -j DROP", ParseOptions{}, "1:26", "", "-m limit beside -m recent", ""},
		{"-A INPUT --rcheck -j DROP", ParseOptions{}, "1:10", "", "--rcheck needs -m recent before it", ""},
		{"-A INPUT -m limitx -j ACCEPT", ParseOptions{}, "1:13", "limitx", "module limitx is not supported", "supported modules: tcp, udp"},
		// well-known modules xdpfw does not run say why (refusedModules)
		{"-A FORWARD -s 10.48.0.0/16 -m policy --dir in --pol ipsec -j ACCEPT", ParseOptions{}, "1:31", "policy",
			"module policy is not supported: it matches the IPsec policy (xfrm)", "-p esp"},
		{"-A FORWARD -m physdev --physdev-in tap0 --physdev-is-bridged -j DROP", ParseOptions{}, "1:15", "physdev",
			"module physdev is not supported: it matches the bridge ports", "kernel's iptables"},
		{"-A OUTPUT -m owner --uid-owner 109 -j ACCEPT", ParseOptions{}, "1:14", "owner",
			"module owner is not supported: it matches the user, group or process of the local socket", "SO_MARK"},
		{"-A INPUT -p udp -m string --algo bm --string TSource -j DROP", ParseOptions{}, "1:20", "string",
			"module string is not supported: it searches the packet's payload", ""},
		{"-A INPUT -m geoip --src-cc CN -j DROP", ParseOptions{}, "1:13", "geoip", "module geoip is not supported", "-m set --match-set"},
		// Docker's documentation's DOCKER-USER rule: a known option, refused with the reason
		{"-A FORWARD -p tcp -m conntrack --ctorigsrc 198.51.100.2 --ctorigdstport 8080 -j ACCEPT", ParseOptions{}, "1:57", "",
			"--ctorigdstport is not supported: xdpfw's classifier tests the packet's own ports", "--ctdir ORIGINAL"},
		{"-A INPUT -m conntrack --ctexp 10:60 -j ACCEPT", ParseOptions{}, "1:23", "", "--ctexpire is not supported", ""},
		{"-A INPUT -p tcp -m tcp ! --tcp-option 8 -j DROP", ParseOptions{}, "1:26", "", "--tcp-option is not supported: it tests whether the TCP header carries an option", "kernel's iptables"},
		{"-A INPUT -p sctp -m sctp --chunk-types any INIT -j ACCEPT", ParseOptions{}, "1:26", "", "--chunk-types is not supported", "-p sctp --dport"},
		{"-A INPUT -m set --match-set x src --packets-gt 10 -j DROP", ParseOptions{}, "1:35", "", "--packets-gt is not supported: it reads or updates the packet and byte counters", ""},
		{"-A INPUT -m set --match-set x src ! --update-counters -j DROP", ParseOptions{}, "1:37", "", "--update-counters is not supported", ""},
		{"-A INPUT -m set --match-set bad/name src -j DROP", ParseOptions{}, "1:29", "bad/name", "not a set name", "1-31 characters"},
		{"-A INPUT -m set --match-set bl both -j DROP", ParseOptions{}, "1:32", "both", "want src or dst", ""},
		{"-A INPUT -m set --match-set bl src,dst -j DROP", ParseOptions{}, "1:32", "src,dst", "want src or dst", ""},
		{"-A INPUT --match-set bl src -j DROP", ParseOptions{}, "1:10", "", "--match-set needs -m set before it", "write -m set --match-set"},
		{"-A INPUT -m set --match-set a src --match-set b src -j DROP", ParseOptions{}, "1:35", "", "--match-set ... src given twice", ""},
		{"-A INPUT -m set -j DROP", ParseOptions{}, "1:10", "", "-m set needs --match-set NAME src|dst", ""},
		{"-A INPUT -p udp -m tcp --dport 53 -j ACCEPT", ParseOptions{}, "1:17", "", "-m tcp needs -p tcp", ""},
		{"-A INPUT -p icmp -m icmp6 -j ACCEPT", ParseOptions{}, "1:18", "", "-m icmp6 needs -p ipv6-icmp", ""},
		{"-A INPUT -p icmp -m icmp -j ACCEPT", ParseOptions{}, "1:18", "", "-m icmp needs --icmp-type", "--icmp-type any"},
		{"-A INPUT -p ipv6-icmp -m icmp6 -j ACCEPT", ParseOptions{}, "1:23", "", "-m icmp6 needs --icmpv6-type", ""},
		{"-A INPUT -m", ParseOptions{}, "1:10", "", "-m needs an argument", ""},
		{"-A INPUT --foo -j DROP", ParseOptions{}, "1:10", "--foo", "unknown option", ""},
		{"-A INPUT -p tcp 22 -j DROP", ParseOptions{}, "1:17", "22", "unexpected argument", "quote text"},
		{"-A INPUT -m comment --comment allow ssh -j DROP", ParseOptions{}, "1:37", "ssh", "unexpected argument", "quote text that contains spaces"},
		{"-A INPUT -s 10.0.0.1 -d ::1 -j DROP", ParseOptions{}, "1:25", "::1", "IPv6 address conflicts with -s 10.0.0.1 (IPv4)", "one rule per family"},
		{"-A INPUT -6 -s 10.0.0.1 -j DROP", ParseOptions{}, "1:16", "10.0.0.1", "IPv4 address conflicts with -6", ""},
		{"-A INPUT -s 10.0.0.1 -6 -j DROP", ParseOptions{}, "1:22", "", "-6 conflicts with -s 10.0.0.1 (IPv4)", ""},
		{"-A INPUT -4 -6 -j DROP", ParseOptions{}, "1:13", "", "-4 and -6 both given", ""},
		{"-A INPUT -4 -4 -j DROP", ParseOptions{}, "1:13", "", "-4 given twice", ""},
		{"-A INPUT -s 2001:db8::1 -j DROP", v4, "1:13", "2001:db8::1", "IPv6 address conflicts with the default family (IPv4)", "ip6tables-save file"},
		{"*filter\n:INPUT DROP [0:0]\n-A INPUT -s 10.0.0.0/8 -j ACCEPT\n-A INPUT -d fd00::1 -j ACCEPT\nCOMMIT\n", v4, "4:13", "fd00::1", "IPv6 address conflicts with the default family (IPv4)", ""},
		{"-A INPUT -p icmp -j DROP", v6, "1:13", "icmp", "-p icmp (IPv4) conflicts with the default family (IPv6)", "ICMPv6 is -p ipv6-icmp"},
		{"-A INPUT -p ipv6-icmp -j DROP", v4, "1:13", "ipv6-icmp", "-p ipv6-icmp (IPv6) conflicts with the default family (IPv4)", "ICMP for IPv4 is -p icmp"},
		{"-A INPUT -6 -p icmp -j DROP", ParseOptions{}, "1:16", "icmp", "-p icmp (IPv4) conflicts with -6", ""},
		{"-A INPUT -p icmp -d ::1 -j DROP", ParseOptions{}, "1:21", "::1", "IPv6 address conflicts with -p icmp (IPv4)", ""},
		{"-A INPUT -j", ParseOptions{}, "1:10", "", "-j needs an argument", ""},
		{"-A INPUT -j QUEUE", ParseOptions{}, "1:13", "QUEUE", "target QUEUE is not supported", ""},
		{"-A INPUT -j MASQUERADE", ParseOptions{}, "1:13", "MASQUERADE", "target MASQUERADE is not supported", ""},
		{"-A INPUT -j accept", ParseOptions{}, "1:13", "accept", "no chain or target accept", "targets are upper case: -j ACCEPT"},
		{"-A INPUT -j my-chain", ParseOptions{}, "1:13", "my-chain", "no chain or target my-chain", "-N my-chain"},
		{"-A INPUT -g my-chain", ParseOptions{}, "1:13", "my-chain", "no chain or target my-chain", ""},
		{"-N reject\n-A INPUT -j reject -j ACCEPT", ParseOptions{}, "2:20", "", "-j given twice", ""},
		{"-N x\n-A INPUT -g x -j x", ParseOptions{}, "2:15", "", "-g and -j both given", ""},
		{"-A INPUT -j ACCEPT -j DROP", ParseOptions{}, "1:20", "", "-j given twice", ""},
		{"-A INPUT -p tcp -p udp -j DROP", ParseOptions{}, "1:17", "", "-p given twice", "column 10"},
		{"-A INPUT -s 1.1.1.1 --source 2.2.2.2 -j DROP", ParseOptions{}, "1:21", "", "-s and --source both given", ""},
		{"-A INPUT -j ACCEPT --reject-with tcp-reset", ParseOptions{}, "1:20", "", "--reject-with is an option of -j REJECT, not of -j ACCEPT", ""},
		{"-A INPUT --reject-with tcp-reset -j REJECT", ParseOptions{}, "1:10", "", "--reject-with needs -j REJECT before it", ""},
		{"-A INPUT -j REJECT --reject-with foo", ParseOptions{}, "1:34", "foo", "unknown --reject-with type", "icmp-port-unreachable"},
		{"-A INPUT -j REJECT --reject-with icmp-port-unreach", v4, "1:34", "icmp-port-unreach", "unknown --reject-with type", ""},
		{"-A INPUT -s 10.0.0.0/8 -j REJECT --reject-with icmp6-port-unreachable", ParseOptions{}, "1:48", "icmp6-port-unreachable", "IPv6 reject type in an IPv4 rule", "IPv4 rules use"},
		{"-A INPUT -j REJECT --reject-with icmp-host-unreachable", v6, "1:34", "icmp-host-unreachable", "IPv4 reject type in an IPv6 rule", "IPv6 rules use"},
		{"-A INPUT -j REJECT --reject-with icmp-port-unreachable", ParseOptions{}, "1:34", "icmp-port-unreachable", "IPv4 reject type in a rule for both IPv4 and IPv6", "add -4"},
		{"-A INPUT -p udp -j REJECT --reject-with tcp-reset", ParseOptions{}, "1:41", "", "--reject-with tcp-reset needs -p tcp", ""},
		{"-A INPUT -j REJECT --reject-with tcp-reset", ParseOptions{}, "1:34", "", "--reject-with tcp-reset needs -p tcp", ""},
		{"-A INPUT ! -p tcp -j REJECT --reject-with tcp-reset", ParseOptions{}, "1:43", "", "--reject-with tcp-reset needs -p tcp", ""},
		{"-A INPUT -p all -j REJECT --reject-with tcp-reset", v4, "1:41", "", "--reject-with tcp-reset needs -p tcp", ""},
		{"-A INPUT -j REJECT --reject-with tcp-reset --reject-with tcp-reset", ParseOptions{}, "1:44", "", "--reject-with given twice", ""},
		{"-A INPUT -j LOG --log-prefix 123456789012345678901234567890", ParseOptions{}, "1:30", "123456789012345678901234567890", "log prefix too long (30 > 29 characters)", ""},
		{"-A INPUT -j LOG --log-level 8", ParseOptions{}, "1:29", "8", "unknown log level", "emerg"},
		{"-A INPUT -j LOG --log-level loud", ParseOptions{}, "1:29", "loud", "unknown log level", ""},
		{"-A INPUT -j DROP --log-prefix x", ParseOptions{}, "1:18", "", "--log-prefix on -j DROP needs --log", "-j DROP --log --log-prefix"},
		{"-A INPUT -j ACCEPT --log-rate 5/min", ParseOptions{}, "1:20", "", "--log-rate on -j ACCEPT needs --log", ""},
		{"-A INPUT --log -j DROP", ParseOptions{}, "1:10", "", "--log needs -j ACCEPT, DROP or REJECT before it", ""},
		{"-A INPUT -j LOG --log", ParseOptions{}, "1:17", "", "-j LOG logs already", "remove --log"},
		{"-A INPUT -j DROP --log --log", ParseOptions{}, "1:24", "", "--log given twice", ""},
		{"-A INPUT -j LOG --log-rate 0/sec", ParseOptions{}, "1:28", "0", "bad log rate", "N/sec"},
		{"-A INPUT -j LOG --log-rate 10/fortnight", ParseOptions{}, "1:31", "fortnight", "unknown rate unit", "sec, min, hour or day"},
		{"-A INPUT -j LOG --log-rate 2000000/sec", ParseOptions{}, "1:28", "2000000", "bad log rate", "1 to 1000000"},
		{"-A INPUT -j LOG --log-burst 0", ParseOptions{}, "1:29", "0", "bad --log-burst", "1 to 1000000"},
		{"-A INPUT -j LOG --log-burst x", ParseOptions{}, "1:29", "x", "bad --log-burst", ""},
		{"-A INPUT --log-burst 3 -j LOG", ParseOptions{}, "1:10", "", "--log-burst needs -j LOG before it", "--log"},
		{"-A INPUT -j LOG --log-rate", ParseOptions{}, "1:17", "", "--log-rate needs an argument", "--log-rate N/sec|min|hour|day"},
		{"-A INPUT --log-level 4 -j LOG", ParseOptions{}, "1:10", "", "--log-level needs -j LOG before it", ""},
		{"-A INPUT -c 1 x -j DROP", ParseOptions{}, "1:15", "x", "not a counter value", ""},
		{"-A INPUT -c 1 -j DROP", ParseOptions{}, "1:10", "", "-c needs 2 arguments", ""},
	}
	for _, tt := range tests {
		name := tt.src
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			rs, err := Parse("bad.rules", []byte(tt.src), tt.opt)
			if err == nil {
				t.Fatalf("no error; rules:\n%s", rs)
			}
			if rs != nil {
				t.Errorf("a rule set was returned with the error")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, not ErrorList", err)
			}
			if len(list) != 1 {
				t.Fatalf("%d errors, want 1:\n%v", len(list), err)
			}
			e := list[0]
			if got := fmt.Sprintf("%d:%d", e.Pos.Line, e.Pos.Col); got != tt.pos || e.Pos.File != "bad.rules" {
				t.Errorf("position %s:%s, want bad.rules:%s\n%v", e.Pos.File, got, tt.pos, e)
			}
			if e.Token != tt.tok {
				t.Errorf("token %q, want %q\n%v", e.Token, tt.tok, e)
			}
			if !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("message %q does not contain %q", e.Msg, tt.msg)
			}
			if !strings.Contains(e.Hint, tt.hintPart) {
				t.Errorf("hint %q does not contain %q", e.Hint, tt.hintPart)
			}
			if tt.tok != "" && !strings.Contains(e.Error(), fmt.Sprintf("%q: ", Clip(tt.tok))) {
				t.Errorf("Error() does not quote the token: %s", e.Error())
			}
		})
	}
}

func TestParseErrorExactText(t *testing.T) {
	src := "-P INPUT DROP\n-A INPUT -p tcp --dport 22 -j ACCEPT\n-A INPUT -s 300.1.1.1 -j DROP\n"
	_, err := Parse("rules.conf", []byte(src), ParseOptions{})
	if want := `rules.conf:3:13: "300.1.1.1": not an IPv4 address`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	_, err = Parse("rules.conf", []byte("-A INPUT -p tcp -j ufw-input\n"), ParseOptions{})
	if want := "rules.conf:1:20: \"ufw-input\": no chain or target ufw-input\n\thint: declare the chain before the rule: -N ufw-input (or :ufw-input - [0:0] in an iptables-save file)"; err == nil || err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

// TestParseReportsEveryBadLine checks that parsing goes on after an error:
// one error per bad line, in line order, and no rule set.
func TestParseReportsEveryBadLine(t *testing.T) {
	src := strings.Join([]string{
		"-P INPUT DROP",
		"-A INPUT -p tcp --dport 70000 --sport 99999 -j ACCEPT", // two problems, one error
		"-A INPUT -j ACCEPT",
		"-A INPUT -j RETURN -j DROP",
		"",
		"-A INPUT -s 10.0.0.0/8 -j FOO",
		"-A INPUT -m state --state OLD -j ACCEPT",
		"-A INPUT --comment \"unterminated",
	}, "\n")
	rs, err := Parse("many.rules", []byte(src), ParseOptions{})
	if rs != nil {
		t.Error("rule set returned despite errors")
	}
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err = %v", err)
	}
	var got []string
	for _, e := range list {
		got = append(got, fmt.Sprintf("%d:%d", e.Pos.Line, e.Pos.Col))
	}
	if want := "2:25 4:20 6:27 7:27 8:20"; strings.Join(got, " ") != want {
		t.Errorf("errors at %v, want %s\n%v", got, want, err)
	}
}

func TestParseManyErrorsTruncated(t *testing.T) {
	src := strings.Repeat("-A INPUT -j NOPE\n", 30)
	_, err := Parse("f", []byte(src), ParseOptions{})
	lines := strings.Split(err.Error(), "\n")
	if last := lines[len(lines)-1]; last != "and 10 more errors" {
		t.Errorf("last line %q", last)
	}
}

func TestParseRuleArgsErrors(t *testing.T) {
	tests := []struct {
		chain string
		args  string
		col   int
		tok   string
		msg   string
	}{
		{"INPUT", "-p tcp --dport 70000 -j ACCEPT", 16, "70000", "port out of range (0-65535)"},
		{"INPUT", "-s 10.0.0.0/33 -j DROP", 13, "33", "prefix length out of range"},
		{"INPUT", "--dport 22 -j DROP", 1, "", "--dport needs -p tcp or -p udp"},
		{"INPUT", "-p tcp -j", 8, "", "-j needs an argument"},
		{"INPUT", "-j RETURN -g x", 11, "", "-j and -g both given"},
		{"-bad", "-j DROP", 1, "-bad", "a chain name cannot start with - or !"},
		{"INPUT", "-m conntrack --ctstate NEW,OLD -j ACCEPT", 28, "OLD", "unknown connection state"},
		{"INPUT", "-s ::1 -j DROP", 4, "::1", "conflicts with the default family (IPv4)"},
	}
	for _, tt := range tests {
		_, err := ParseRuleArgs(tt.chain, strings.Fields(tt.args), ParseOptions{Family: FamilyIPv4})
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s %s: err = %v", tt.chain, tt.args, err)
			continue
		}
		want := Pos{File: "<command line>", Line: 1, Col: tt.col}
		if e.Pos != want || e.Token != tt.tok || !strings.Contains(e.Msg, tt.msg) {
			t.Errorf("%s %s: got %v (token %q), want %v %q %q", tt.chain, tt.args, e, e.Token, want, tt.tok, tt.msg)
		}
	}
}

func TestParseErrorsMore(t *testing.T) {
	tests := []struct{ src, pos, msg string }{
		{"-A -p tcp -j DROP", "1:1", "-A needs a chain"},
		{`-A INPUT -i "-j" -j DROP`, "1:13", "not an interface name"},
		{"-A INPUT -j NOPE\n-A INPUT -j NOPE\n", "1:13", "no chain or target NOPE"},
	}
	for _, tt := range tests {
		_, err := Parse("f", []byte(tt.src), ParseOptions{})
		var e *Error
		if !errors.As(err, &e) || fmt.Sprintf("%d:%d", e.Pos.Line, e.Pos.Col) != tt.pos || !strings.Contains(e.Msg, tt.msg) {
			t.Errorf("%q: err = %v, want %s %s", tt.src, err, tt.pos, tt.msg)
		}
	}
	l := make(ErrorList, 21)
	for i := range l {
		l[i] = &Error{Pos: Pos{Line: i + 1, Col: 1}, Msg: "x"}
	}
	if !strings.HasSuffix(l.Error(), "\nand 1 more error") {
		t.Errorf("21 errors: %q", l.Error()[len(l.Error())-30:])
	}
}
