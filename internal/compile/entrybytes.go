package compile

import (
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"unsafe"
)

// Entries saved as raw memory: the control plane keeps the main
// generation's entries in a file it maps back into memory, so a single
// edit reads the few it needs without decoding the rest (a delete on
// 100,000 rules scans them all: decoding each would cost more than the
// 10 ms budget). The layout is this build's; EntryLayout names it, and a
// file made by another layout is refused.

// EntryLayout fingerprints the memory layout of Entry (size, and every
// field's name, offset and size).
var EntryLayout = func() uint64 {
	h := fnv.New64a()
	t := reflect.TypeFor[Entry]()
	fmt.Fprintf(h, "%d/%d", t.Size(), t.Align())
	for i := range t.NumField() {
		f := t.Field(i)
		fmt.Fprintf(h, ";%s:%s@%d+%d", f.Name, f.Type, f.Offset, f.Type.Size())
	}
	return h.Sum64()
}()

const entrySize = int(unsafe.Sizeof(Entry{}))

// EntryBytes is the memory of entries (EntryLayout).
func EntryBytes(entries []Entry) []byte {
	if len(entries) == 0 {
		return nil
	}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&entries[0])), len(entries)*entrySize)...)
}

// EntriesOf views b, made by EntryBytes in a build of the same
// EntryLayout, as entries, without copying. b must stay alive and
// unchanged while they are used, and be aligned as an Entry is.
func EntriesOf(b []byte) ([]Entry, error) {
	if len(b)%entrySize != 0 {
		return nil, fmt.Errorf("%d bytes are no whole number of entries", len(b))
	}
	if len(b) == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(Entry{}) != 0 {
		return nil, errors.New("entries not aligned")
	}
	return unsafe.Slice((*Entry)(unsafe.Pointer(&b[0])), len(b)/entrySize), nil
}
