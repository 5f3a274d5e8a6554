package firewall

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// The base: the rules of the main generation (the one the classifier
// trees were built from), with what the data plane holds of it, in one
// binary file next to the state (rules-STAMP.bin). A single edit on a
// large rule set reads neither JSON nor rule text: the file is mapped into
// memory, its rules and entries are used in place (compile.FromRaw), and
// only what the edit touches is read. A rebuild writes a new file;
// state.json names the one in force.
//
// Layout (little endian; "raw" is compile.RawBytes, in the memory layout
// compile.Layout names):
//
//	0    "XDPFWRS2", u32 format, u32 checksum, u64 stamp
//	24   u32 rules, u32 entries, u32 text bytes, u32 flags (baseCompiled, baseLogs)
//	40   u32 chain ends [3], u32 highest rule id
//	56   roots: 6 x 40 bytes
//	296  u64 compile.Layout
//	304  rules: 16 bytes each: u32 id, u32 text offset, u32 text length,
//	     u8 chain, u8 verdict, u8 flags (ruleCT, ruleLogs), u8 0
//	     rule text (canonical, "-A CHAIN ..."), padded to 8 bytes
//	     raw compile.BaseRule each (ids, chains and entry spans again)
//	     raw compile.Entry each
//
// The checksum (format 3 on; format 2, written before, has none) is
// CRC-32C of everything after it (record.go, checksum), verified on every
// read: a base is never changed once written.
//
// What comes before the raw parts reads the same in every build: a base
// written by a build of another Layout (an upgrade) still lists the rules
// in force, and is treated as not compiled until the next full build.
const (
	baseMagic    = "XDPFWRS2"
	baseFormat   = 3
	baseFormatV2 = 2 // no checksum: read, never written
	baseHeader   = 304
	baseRootSize = 40
	baseInfoSize = 16
	// baseCompiled: spans, roots and entries are those of the main
	// generation installed as stamp (else the file only lists the rules,
	// as after reading a version 1 or 2 state).
	baseCompiled = 1
	// baseLogs: some rule logs (ruleLogs) or has -m limit or -m recent, so that an
	// edit can tell without reading every rule that it cannot use the
	// delta stage.
	baseLogs = 2
	// baseChains: the rule set has user chains, jumps, RETURNs or rules
	// without -j: it is flattened (compile/flatten.go), a rule's entries
	// are no span, so edits recompile it in full (Firewall.edit).
	baseChains = 4
	// ruleCT: the rule tests the connection (-m conntrack, -m state).
	ruleCT = 1
	// ruleLogs: the rule logs (-j LOG, or --log).
	ruleLogs = 2
)

var le = binary.LittleEndian

// baseRule is one rule of a base.
type baseRule struct {
	ID      uint32
	Chain   rules.Chain
	Verdict rules.Verdict
	CT      bool
	Logs    bool // -j LOG, or --log
	State   bool // -m limit, -m recent, -m hashlimit or -m connlimit (not stored: only the base's baseLogs flag)
	Span    compile.Span
	Text    string
}

func baseRuleOf(r *rules.Rule, id uint32, span compile.Span) baseRule {
	return baseRule{ID: id, Chain: r.Chain, Verdict: r.Target.Verdict, CT: r.Match.NeedsConntrack(),
		Logs: r.Target.Logs(), State: r.Match.Limit != nil || r.Match.Recent != nil || r.Match.HashLimit != nil || r.Match.ConnLimit != nil, Span: span, Text: r.String()}
}

// encodeBase lays out a base of rs (with t compiled from it as stamp; t
// nil: rules only).
func encodeBase(stamp uint64, rs []baseRule, t *compile.Tables) []byte {
	text := 0
	for i := range rs {
		text += len(rs[i].Text)
	}
	brs := make([]compile.BaseRule, len(rs))
	for i := range rs {
		brs[i] = compile.BaseRule{ID: rs[i].ID, Chain: rs[i].Chain, Span: rs[i].Span}
	}
	var ents []byte
	if t != nil {
		ents = compile.RawBytes(t.Entries)
	}
	textOff := baseHeader + len(rs)*baseInfoSize
	rawOff := (textOff + text + 7) &^ 7
	entOff := rawOff + compile.RawSize[compile.BaseRule](len(rs))
	b := make([]byte, entOff+len(ents))
	copy(b, baseMagic)
	le.PutUint32(b[8:], baseFormat)
	le.PutUint64(b[16:], stamp)
	le.PutUint32(b[24:], uint32(len(rs)))
	le.PutUint32(b[32:], uint32(text))
	var maxID, flags uint32
	for i := range rs {
		maxID = max(maxID, rs[i].ID)
		if rs[i].Logs || rs[i].State {
			flags |= baseLogs
		}
		if rs[i].Chain == rules.ChainUser || rs[i].Verdict > rules.VerdictLog {
			flags |= baseChains
		}
	}
	le.PutUint32(b[52:], maxID)
	le.PutUint64(b[296:], compile.Layout)
	if t != nil {
		le.PutUint32(b[28:], uint32(len(t.Entries)))
		flags |= baseCompiled
		for c, end := range t.ChainEnd {
			le.PutUint32(b[40+4*c:], end)
		}
		for r := range t.Roots {
			putRoot(b[56+r*baseRootSize:], &t.Roots[r])
		}
	}
	le.PutUint32(b[36:], flags)
	toff := 0
	for i := range rs {
		x := b[baseHeader+i*baseInfoSize:]
		le.PutUint32(x[0:], rs[i].ID)
		le.PutUint32(x[4:], uint32(toff))
		le.PutUint32(x[8:], uint32(len(rs[i].Text)))
		x[12], x[13] = byte(rs[i].Chain), byte(rs[i].Verdict)
		if rs[i].CT {
			x[14] |= ruleCT
		}
		if rs[i].Logs {
			x[14] |= ruleLogs
		}
		copy(b[textOff+toff:], rs[i].Text)
		toff += len(rs[i].Text)
	}
	copy(b[rawOff:], compile.RawBytes(brs))
	copy(b[entOff:], ents)
	le.PutUint32(b[12:], checksum(b[16:]))
	return b
}

func putRoot(b []byte, r *compile.Root) {
	for g, n := range r.Groups {
		le.PutUint32(b[4*g:], n)
	}
	le.PutUint32(b[20:], r.RuleID)
	le.PutUint32(b[24:], r.FastRuleID)
	copy(b[28:], []byte{byte(r.Action), byte(r.Reason), r.Flags, r.FastStates, byte(r.FastAction), byte(r.FastReason), byte(r.FastReject)})
	if r.FastLog {
		b[35] = 1
	}
}

func getRoot(b []byte) (r compile.Root) {
	for g := range r.Groups {
		r.Groups[g] = le.Uint32(b[4*g:])
	}
	r.RuleID, r.FastRuleID = le.Uint32(b[20:]), le.Uint32(b[24:])
	r.Action, r.Reason, r.Flags, r.FastStates = compile.Action(b[28]), compile.Reason(b[29]), b[30], b[31]
	r.FastAction, r.FastReason, r.FastReject = compile.Action(b[32]), compile.Reason(b[33]), compile.Reject(b[34])
	r.FastLog = b[35] != 0
	return r
}

// base is an open base file.
type base struct {
	name     string // in the state directory; "" until written
	data     []byte
	unmap    func()
	stamp    uint64
	n        int
	compiled bool
	logs     bool // some rule logs (baseLogs)
	chains   bool // flattened chains (baseChains)
	maxID    uint32
	rules    []compile.BaseRule // in data, or decoded (another Layout)
	textOff  int
	entries  []compile.Entry // in data
}

// baseName is the file name of the base installed as stamp.
func baseName(stamp uint64) string { return fmt.Sprintf("rules-%d.bin", stamp) }

// parseBase checks a base's layout and returns a handle on it.
func parseBase(name string, b []byte) (*base, error) {
	bad := func(why string) error { return &corruptError{name, "not a base of this xdpfw: " + why} }
	if len(b) < baseHeader || string(b[:8]) != baseMagic {
		return nil, bad("no header")
	}
	switch le.Uint32(b[8:]) {
	case baseFormat:
		if sum := checksum(b[16:]); sum != le.Uint32(b[12:]) {
			return nil, bad(fmt.Sprintf("checksum %d, the file says %d", sum, le.Uint32(b[12:])))
		}
	case baseFormatV2:
	default:
		return nil, bad(fmt.Sprintf("format %d", le.Uint32(b[8:])))
	}
	x := &base{name: name, data: b, stamp: le.Uint64(b[16:]), n: int(le.Uint32(b[24:])),
		compiled: le.Uint32(b[36:])&baseCompiled != 0, logs: le.Uint32(b[36:])&baseLogs != 0,
		chains: le.Uint32(b[36:])&baseChains != 0, maxID: le.Uint32(b[52:])}
	nEnt, text := int(le.Uint32(b[28:])), int(le.Uint32(b[32:]))
	if x.n > (len(b)-baseHeader)/baseInfoSize || text > len(b) {
		return nil, bad("truncated")
	}
	x.textOff = baseHeader + x.n*baseInfoSize
	rawOff := (x.textOff + text + 7) &^ 7
	if rawOff > len(b) {
		return nil, bad("truncated")
	}
	for k := range x.n { // every rule's text within the text
		i := b[baseHeader+k*baseInfoSize:]
		if off, n := uint64(le.Uint32(i[4:])), uint64(le.Uint32(i[8:])); off+n > uint64(text) {
			return nil, bad(fmt.Sprintf("rule %d's text out of bounds", k+1))
		}
	}
	if le.Uint64(b[296:]) != compile.Layout {
		// written by another build: the rules only, compiled again at
		// the next full build
		x.compiled, x.rules = false, make([]compile.BaseRule, x.n)
		for k := range x.rules {
			i := b[baseHeader+k*baseInfoSize:]
			x.rules[k] = compile.BaseRule{ID: le.Uint32(i[0:]), Chain: rules.Chain(i[12])}
		}
		return x, nil
	}
	entOff := rawOff + compile.RawSize[compile.BaseRule](x.n)
	if nEnt > len(b) || entOff+compile.RawSize[compile.Entry](nEnt) != len(b) {
		return nil, bad("truncated")
	}
	var err error
	if x.rules, err = compile.FromRaw[compile.BaseRule](b[rawOff:], x.n); err != nil {
		return nil, bad(err.Error())
	}
	if x.entries, err = compile.FromRaw[compile.Entry](b[entOff:], nEnt); err != nil {
		return nil, bad(err.Error())
	}
	return x, nil
}

// openBase maps the base file name of the state directory, which must
// be the base installed as stamp.
func openBase(p Paths, name string, stamp uint64) (*base, error) {
	path := filepath.Join(p.StateDir, name)
	fd, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the rules in force: %w", err)
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	b, err := parseBase(path, data)
	if err == nil && b.stamp != stamp {
		b, err = nil, &corruptError{path, fmt.Sprintf("holds build %d, the record names build %d", b.stamp, stamp)}
	}
	if err != nil {
		_ = unix.Munmap(data)
		return nil, err
	}
	b.name = name
	b.unmap = func() { _ = unix.Munmap(data) }
	return b, nil
}

// close unmaps the file.
func (b *base) close() {
	if b != nil && b.unmap != nil {
		b.unmap()
		b.unmap = nil
	}
}

// write saves an in-memory base (name "") into the state directory.
func (b *base) write(p Paths) error {
	if b.name != "" {
		return nil
	}
	name := baseName(b.stamp)
	if err := writeFileAtomic(filepath.Join(p.StateDir, name), b.data); err != nil {
		return fmt.Errorf("saving the rules in force: %w", err)
	}
	b.name = name
	return nil
}

// rule decodes rule k.
func (b *base) rule(k int) baseRule {
	br := &b.rules[k]
	x := b.data[baseHeader+k*baseInfoSize:]
	return baseRule{ID: br.ID, Chain: br.Chain, Span: br.Span, Verdict: rules.Verdict(x[13]), CT: x[14]&ruleCT != 0,
		Logs: x[14]&ruleLogs != 0, Text: string(b.text(k))}
}

// ruleLogs reports whether rule k logs (-j LOG, or --log).
func (b *base) ruleLogs(k int) bool { return b.data[baseHeader+k*baseInfoSize+14]&ruleLogs != 0 }

// text is rule k's canonical text, in place.
func (b *base) text(k int) []byte {
	x := b.data[baseHeader+k*baseInfoSize:]
	off, n := int(le.Uint32(x[4:])), int(le.Uint32(x[8:]))
	return b.data[b.textOff+off : b.textOff+off+n]
}

// overlay is the base with no edits, using the base's rules and entries
// in place. Only a compiled base can carry edits in the delta stage; the
// others list their rules.
func (b *base) overlay() *compile.Overlay {
	o := &compile.Overlay{Main: b.entries, Base: b.rules}
	if b.compiled {
		for c := range o.ChainEnd {
			o.ChainEnd[c] = le.Uint32(b.data[40+4*c:])
		}
		for r := range o.Roots {
			o.Roots[r] = getRoot(b.data[56+r*baseRootSize:])
		}
	}
	return o
}
