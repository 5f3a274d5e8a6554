package compile

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"reflect"
	"unsafe"
)

// Entries and base rules saved as raw memory: the control plane keeps the
// main generation's in a file it maps back into memory, so that a single
// edit reads what it needs without decoding the rest (a delete on 100,000
// rules scans every entry after it: decoding each would take most of the
// 10 ms budget). The layout is this build's; Layout names it, and a file
// of another layout must be refused.

// rawType are the types saved raw.
type rawType interface{ Entry | BaseRule }

// Layout fingerprints the memory layout of Entry and BaseRule (sizes, and
// every field's name, type, offset and size, nested structs included).
var Layout = func() uint64 {
	h := fnv.New64a()
	describe(h, reflect.TypeFor[Entry]())
	describe(h, reflect.TypeFor[BaseRule]())
	return h.Sum64()
}()

func describe(w io.Writer, t reflect.Type) {
	fmt.Fprintf(w, "{%s %d/%d", t, t.Size(), t.Align())
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(w, ";%s@%d:", f.Name, f.Offset)
			describe(w, f.Type)
		}
	}
	fmt.Fprint(w, "}")
}

// RawBytes is the memory of v (Layout).
func RawBytes[T rawType](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	size := int(unsafe.Sizeof(v[0]))
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*size)...)
}

// FromRaw views b, made by RawBytes in a build of the same Layout, as n
// values, without copying: b must stay alive and unchanged while they are
// used, and be aligned as a T is (mapped files and allocations are).
func FromRaw[T rawType](b []byte, n int) ([]T, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b) < n*size {
		return nil, fmt.Errorf("%d bytes hold fewer than %d values", len(b), n)
	}
	if n == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(zero) != 0 {
		return nil, errors.New("values not aligned")
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), nil
}

// RawSize is the size of n values of T (RawBytes).
func RawSize[T rawType](n int) int {
	var zero T
	return n * int(unsafe.Sizeof(zero))
}
