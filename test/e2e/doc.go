// Package e2e holds the end-to-end tests of xdpfw: they build the real
// binary once, then run it (via `ip netns exec`) against XDP programs
// attached to veth interfaces in throw-away network namespaces, and check
// verdicts with real TCP, UDP and ICMP traffic between those namespaces,
// plus the JSON the CLI reports (counters, status, trace).
// TestIptablesDifferential holds xdpfw and its reference matcher to real
// iptables (legacy and nft back ends) on random rule sets and crafted
// frames (iptables_diff_test.go).
//
// The tests need root (they fail, never skip, without it). Every test has
// its own namespaces, its own private bpffs (the pin dir) and its own state
// dir, and removes everything it set up even when it fails. Run them with
//
//	GOFLAGS=-mod=mod go test -count=1 -v ./test/e2e/
package e2e
