package nat

// Regenerate with `make generate` (needs clang); the output is committed.
// The object is a test harness of bpf/lib/nat.h (bpf/test/nat_rewrite.c),
// not a part of the firewall: only this package's tests load it.
//go:generate go tool bpf2go -tags linux -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 $BPF2GO_CFLAGS" -type fw_nat_rw -type fw_nat_tuple natrw ../../bpf/test/nat_rewrite.c -- -I../../bpf
