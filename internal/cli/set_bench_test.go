package cli

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// writeCIDRs writes n distinct random IPv4 CIDRs, /8 to /32, one per line.
func writeCIDRs(tb testing.TB, path string, n int, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	seen := make(map[netip.Prefix]bool, n)
	var b bytes.Buffer
	for len(seen) < n {
		a := netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
		p := netip.PrefixFrom(a, 8+r.IntN(25)).Masked()
		if !seen[p] {
			seen[p] = true
			fmt.Fprintln(&b, p)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkSetAdd1M is `xdpfw set add big --file F` with a million
// distinct random CIDRs (/8 to /32) into an empty set: reading, parsing,
// sorting, writing the trie, recording the state. Run it with
//
//	go test -run '^$' -bench SetAdd1M -benchtime 3x ./internal/cli/
func BenchmarkSetAdd1M(b *testing.B) {
	testutil.RequireRoot(b)
	dir := b.TempDir()
	file := filepath.Join(dir, "1M.txt")
	writeCIDRs(b, file, 1_000_000, 1)
	paths := []string{"--pin-dir", filepath.Join(testutil.BPFFS(b), "xdpfw"), "--state-dir", filepath.Join(dir, "state")}
	run := func(args ...string) {
		var out, errb bytes.Buffer
		if code := Main(append(paths, args...), &out, &errb); code != 0 {
			b.Fatalf("xdpfw %v: exit %d: %s", args, code, errb.String())
		}
	}
	run("set", "create", "big", "hash:net", "--size", "1000000")
	b.ResetTimer()
	for b.Loop() {
		run("set", "add", "big", "--file", file)
		b.StopTimer()
		run("set", "flush", "big")
		b.StartTimer()
	}
	b.StopTimer()
	run("detach", "--all")
}
