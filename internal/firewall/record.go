package firewall

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
)

// The record of what is in force, and its one commit point.
//
// The kernel decides what packets see; the record says what that is in
// words: the rules' text and ids, the policies, the interfaces, the named
// sets. It lives in the state directory:
//
//	state.json        the record in force (checksummed)
//	state.next.json   the record of a change in progress
//	rules-STAMP.bin   the rules of a main generation (base.go): written
//	                  once, never changed, checksummed, named by its stamp
//	lock              serializes changes; holds the holder's pid and command
//
// Every record of a loaded firewall names the classifier it describes as
// the kernel identifies it (datapath.InForce: the stamp of the main
// generation and the tag of the delta stage). A change writes its base
// file and its record (state.next.json) first, then makes the one kernel
// write that switches packets (fw_active): that write commits the change.
// Only then is the record renamed to state.json and the files no record
// names removed. Readers believe the record the kernel's InForce names,
// state.next.json or state.json, and nothing else. So after a kill -9 at
// any point there is exactly one truth: before the switch, the old record
// (state.next.json is an orphan, removed by the next command under the
// lock); after it, the new one (made state.json by the next command). A
// record the kernel does not confirm, a file that fails its checksum, or
// no record at all, while the program is pinned, is said as such
// (RecordError): never "not loaded", never the wrong rules.
//
// The data plane's settings (--malformed, conntrack timeouts and full
// policy, REJECT's budget) are one map (fw_config_map) written apart from
// the classifier switch; readers take them from the kernel, so they are
// true too.
//
// Nothing here is fsynced: the record lives as long as the pins (both are
// gone after a reboot: /run and bpffs are in memory), and a killed
// process's writes are in the page cache.
//
// Files are opened without following links (O_NOFOLLOW), temporary files
// are created exclusively (O_EXCL), and a state directory that is not the
// user's own or that others may write is refused (checkStateDir).

const (
	stateName = "state.json"
	nextName  = "state.next.json"
	lockName  = "lock"
	tmpPrefix = ".tmp-"
)

// StateFile is the record in force.
func (p Paths) StateFile() string { return filepath.Join(p.StateDir, stateName) }

func (p Paths) nextFile() string { return filepath.Join(p.StateDir, nextName) }

// interruptedName marks a load that made maps anew (another layout or
// size: datapath.Upgrades) from just before it switches interfaces to its
// program until its maps are pinned in place of the old ones: a load
// killed in between leaves those interfaces running a program whose maps
// are pinned nowhere, while the pins are the old ones. Changes refuse to
// write maps no packet reads (Open), the daemon loads again
// (loadNeeded), and the next load, which replaces the program, removes
// the mark.
const interruptedName = "load-interrupted"

func (p Paths) interruptedFile() string { return filepath.Join(p.StateDir, interruptedName) }

// errInterrupted refuses a change after an interrupted load.
var errInterrupted = errors.New("an xdpfw load that made new tables (another layout or size) was interrupted after it switched " +
	"interfaces to its program: the maps pinned are not the ones their packets use, so a change now would not reach them; " +
	"run that `xdpfw load` again (or `xdpfw detach --all`)")

// RecordError says that the program is pinned (attached and filtering)
// but its record is lost, corrupt or not the one the kernel has in force.
type RecordError struct {
	Path string
	Err  error
}

func (e *RecordError) Error() string {
	what := "corrupt"
	if errors.Is(e.Err, os.ErrNotExist) {
		what = "lost"
	}
	where := ""
	if e.Path != "" {
		where = e.Path + ": "
	}
	return fmt.Sprintf("xdpfw is attached and filtering, but the record of its rules is %s: %s%v; "+
		"run `xdpfw load -i IFACE FILE` to replace the rules in place (packets stay filtered throughout), "+
		"or `xdpfw detach --all` to remove the firewall", what, where, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// checksum is CRC-32C (Castagnoli): a record or base that a disk, an
// editor or a partial copy damaged is refused. It does not authenticate:
// whoever may write the state directory is root anyway. CRC-32C rather
// than SHA-256 because a base is verified on every read, single edits
// included (their bar is < 10 ms at 100k rules): on a 30 MB base it
// costs ~1 ms here, SHA-256 ~40 ms.
func checksum(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// encodeRecord lays out st as a record: the state's JSON, and its
// checksum, in one JSON object.
func encodeRecord(st *state) ([]byte, error) {
	st.Version = stateVersion
	body, err := json.MarshalIndent(st, "  ", "  ")
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "{\n  \"crc32c\": %d,\n  \"state\": %s\n}\n", checksum(body), body), nil
}

// decodeRecord reads a record, or a state of version 1 to 3 (no checksum:
// read as it is, and written as a record by the next change).
func decodeRecord(path string, b []byte) (*state, error) {
	var w struct {
		CRC     *uint32         `json:"crc32c"`
		State   json.RawMessage `json:"state"`
		Version int             `json:"version"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, &corruptError{path, err.Error()}
	}
	body := []byte(w.State)
	switch {
	case w.State == nil && (w.Version < stateVersionV1 || w.Version >= stateVersion):
		if w.Version > stateVersion {
			return nil, fmt.Errorf("%s: state version %d, this xdpfw reads %d to %d", path, w.Version, stateVersionV1, stateVersion)
		}
		return nil, &corruptError{path, "no checksum"}
	case w.State == nil:
		body = b
	case w.CRC == nil:
		return nil, &corruptError{path, "no checksum"}
	case checksum(body) != *w.CRC:
		return nil, &corruptError{path, fmt.Sprintf("checksum %d, the file says %d", checksum(body), *w.CRC)}
	}
	var st state
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, &corruptError{path, err.Error()}
	}
	if w.State != nil && st.Version != stateVersion {
		return nil, fmt.Errorf("%s: state version %d, this xdpfw reads %d to %d", path, st.Version, stateVersionV1, stateVersion)
	}
	if st.Interfaces == nil {
		st.Interfaces = map[string]Iface{}
	}
	if st.Sets == nil {
		st.Sets = map[string]*setState{}
	}
	return &st, nil
}

// corruptError is a record or base that fails its checks.
type corruptError struct{ path, why string }

func (e *corruptError) Error() string { return fmt.Sprintf("%s: corrupt (%s)", e.path, e.why) }

// readRecord reads the record at path (nil, nil when there is none).
func readRecord(path string) (*state, error) {
	b, err := readFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeRecord(path, b)
}

// loadState reads the record in force (nil when there is none) without
// asking the kernel: for the named sets of a firewall not loaded.
func loadState(p Paths) (*state, error) {
	if err := checkStateDir(p, false); err != nil {
		return nil, err
	}
	return readRecord(p.StateFile())
}

// confirmedBy reports whether st is the record of what the kernel has in
// force (k). A state of version 1 to 3 names no delta: it is believed when
// its main generation is the one in force, as the xdpfw that wrote it did.
func (st *state) confirmedBy(k datapath.InForce) bool {
	if st == nil || !st.loaded() || !k.Installed {
		return false
	}
	if st.Commit == nil {
		return st.Builds == k.Stamp
	}
	return *st.Commit == k
}

// resolve reads the record the kernel's InForce confirms: state.next.json
// (a change whose switch happened) or state.json. With the lock held
// (locked), it also finishes what a killed change left: a confirmed
// state.next.json becomes state.json, an unconfirmed one is removed, and
// so are base and temporary files no record names. The settings are
// taken from the kernel.
func resolve(p Paths, dp *datapath.Datapath, locked bool) (*state, error) {
	if err := checkStateDir(p, false); err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		k, err := dp.InForce()
		if err != nil {
			return nil, err
		}
		// The pending record first: a change renames it to state.json
		// after its switch, so read in this order one of them is the
		// record of k unless the kernel switched meanwhile.
		next, nerr := readRecord(p.nextFile())
		cur, cerr := readRecord(p.StateFile())
		if k2, err := dp.InForce(); err != nil {
			return nil, err
		} else if k2 != k && try < 20 {
			continue // a change switched while we read: read again
		}
		var st *state
		switch {
		case nerr == nil && next.confirmedBy(k):
			st = next
			if locked {
				if err := os.Rename(p.nextFile(), p.StateFile()); err != nil {
					return nil, fmt.Errorf("finishing the change a killed xdpfw made: %w", err)
				}
			}
		case cerr == nil && cur.confirmedBy(k):
			st = cur
		default:
			err, path := cerr, "" // read errors name the file
			switch {
			case err == nil && cur == nil:
				err = os.ErrNotExist
			case err == nil && !cur.loaded():
				err = errors.New("it records named sets only")
			case err == nil:
				err = fmt.Errorf("it records %s, the kernel has %s in force", cur.commitText(), commitText(k))
			}
			if cerr == nil {
				path = p.StateFile()
			}
			return nil, &RecordError{Path: path, Err: err}
		}
		if locked {
			if err := cleanup(p, st); err != nil {
				return nil, err
			}
		}
		c, err := dp.ConfigInForce()
		if err != nil {
			return nil, err
		}
		st.setConfig(c)
		return st, nil
	}
}

// commitText names what a record says is in force.
func (st *state) commitText() string {
	if st.Commit == nil {
		return commitText(datapath.InForce{Installed: true, Stamp: st.Builds})
	}
	return commitText(*st.Commit)
}

func commitText(k datapath.InForce) string {
	switch {
	case !k.Installed:
		return "no rule set"
	case k.Delta == "":
		return fmt.Sprintf("classifier build %d", k.Stamp)
	}
	return fmt.Sprintf("classifier build %d with edits %s", k.Stamp, k.Delta)
}

// setConfig records the data plane's settings as the kernel holds them.
func (st *state) setConfig(c datapath.Config) {
	st.Malformed = "drop"
	if c.MalformedAction == compile.ActAccept {
		st.Malformed = "accept"
	}
	st.CTFull = "drop"
	if c.CTFullAccept {
		st.CTFull = "accept"
	}
	st.CTTimeouts = c.CTTimeouts
	st.RejectRate, st.RejectBurst, st.RejectGlobalRate = c.RejectRate, c.RejectBurst, c.RejectGlobalRate
	st.CTTCPPickup = "loose"
	if c.CTTCPStrict {
		st.CTTCPPickup = "strict"
	}
	// the program reads xdp-veth as xdp: which devices the fast path uses
	// is fw_fwd_ports', written from the record
	if c.Forward != datapath.ForwardXDP || st.Forward != string(datapath.ForwardXDPVeth) {
		st.Forward = string(c.Forward)
	}
	st.CTKernelNAT = "on"
	if c.KernelNATOff {
		st.CTKernelNAT = "off"
	}
}

// cleanup removes the files of the state directory no record names: a
// pending record that was never committed (resolve renamed one that was),
// base files other than st's, and temporary files.
func cleanup(p Paths, st *state) error {
	ents, err := os.ReadDir(p.StateDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		n := e.Name()
		base := strings.HasPrefix(n, "rules-") && (strings.HasSuffix(n, ".bin") || strings.HasSuffix(n, ".bin.tmp"))
		if n == nextName || strings.HasPrefix(n, tmpPrefix) || base && (st == nil || n != st.Base) {
			if err := os.Remove(filepath.Join(p.StateDir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// save writes st as the record in force, replacing state.json whole: for
// what changes no classifier (named sets, interface modes, the program
// version), and for a firewall not loaded. While loaded, st names the
// classifier in force, so the kernel still confirms it.
func (st *state) save(p Paths) error {
	if err := checkStateDir(p, true); err != nil {
		return err
	}
	if !st.loaded() {
		st.Commit = nil
	}
	b, err := encodeRecord(st)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(p.StateFile(), b); err != nil {
		return err
	}
	return cleanup(p, st)
}

// commit puts a change in force: it writes the record f.st (naming want,
// what the kernel will have in force) as the pending record, then runs
// swap, the kernel write that switches packets to the change and so
// commits it, then makes the record the one in force and removes what no
// record names. It reports whether the change is in force: when swap
// fails, the kernel says whether it switched; if not, the pending record
// is removed and nothing changed.
func (f *Firewall) commit(want datapath.InForce, swap func() error) (bool, error) {
	st := f.st
	prev := st.Commit
	st.Commit = &want
	b, err := encodeRecord(st)
	if err == nil {
		err = writeFileAtomic(f.paths.nextFile(), b)
	}
	if err != nil {
		st.Commit = prev
		return false, fmt.Errorf("recording the change: %w", err)
	}
	crashAt("recorded")
	if err := swap(); err != nil {
		if k, kerr := f.dp.InForce(); kerr != nil || k != want {
			_ = os.Remove(f.paths.nextFile())
			st.Commit = prev
			return false, err
		}
		err = fmt.Errorf("the change is in force, but: %w", err)
		if rerr := os.Rename(f.paths.nextFile(), f.paths.StateFile()); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return true, err
	}
	crashAt("switched")
	if err := os.Rename(f.paths.nextFile(), f.paths.StateFile()); err != nil {
		return true, fmt.Errorf("the change is in force, but recording it: %w (the next xdpfw command finishes it)", err)
	}
	crashAt("committed")
	if err := cleanup(f.paths, st); err != nil {
		return true, err
	}
	crashAt("cleaned")
	return true, nil
}

// crashAt kills this process (SIGKILL: no deferred function runs) at step
// when XDPFW_TEST_CRASH names it, as "step" or "step:N" for its Nth
// time: the crash-consistency tests kill every command at every step.
func crashAt(step string) {
	if testCrash == "" {
		return
	}
	name, nth, _ := strings.Cut(testCrash, ":")
	if name != step {
		return
	}
	crashCount++
	if n, err := strconv.Atoi(nth); err == nil && n != crashCount {
		return
	}
	_ = unix.Kill(os.Getpid(), unix.SIGKILL)
	select {} // the signal is on its way
}

var (
	testCrash  = os.Getenv("XDPFW_TEST_CRASH")
	crashCount int
)

// checkStateDir refuses a state directory that is not a directory owned
// by the user running xdpfw, or that group or others may write: whoever
// could plant a link there could make xdpfw (root) overwrite any file.
// With create it makes a missing one (mode 0700).
func checkStateDir(p Paths, create bool) error {
	if create {
		if err := os.MkdirAll(p.StateDir, 0o700); err != nil {
			return err
		}
	}
	fi, err := os.Stat(p.StateDir)
	if errors.Is(err, os.ErrNotExist) && !create {
		return nil // nothing recorded yet
	}
	if err != nil {
		return err
	}
	sys, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("state directory %s is not a directory", p.StateDir)
	case ok && int(sys.Uid) != os.Geteuid():
		return fmt.Errorf("state directory %s is owned by uid %d, not by the user running xdpfw (uid %d): refused (chown it, or use another --state-dir)",
			p.StateDir, sys.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("state directory %s may be written by group or others (mode %04o): refused (chmod go-w it, or use another --state-dir)",
			p.StateDir, fi.Mode().Perm())
	}
	return nil
}

// readFile reads a file of the state directory, not following a link.
func readFile(path string) ([]byte, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(fd)
}

// writeFileAtomic writes a file through a new temporary one (created
// exclusively: a link planted in its place is never followed) and a
// rename.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), tmpPrefix+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// NoWait as Paths.LockWait: fail at once when another xdpfw holds the lock.
const NoWait time.Duration = -1

// lockNotice is how long lock waits silently before saying what it waits for.
const lockNotice = time.Second

// lock serializes xdpfw invocations that change the firewall. While it
// waits it says, after a second, for whom (on standard error, or to
// p.LockWaiting); it waits p.LockWait at most (0: as long as it takes).
// The holder writes its pid and command into the lock file.
func lock(p Paths) (func(), error) {
	if err := checkStateDir(p, true); err != nil {
		return nil, err
	}
	path := filepath.Join(p.StateDir, lockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	told := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		waited := time.Since(start)
		holder := lockHolder(path)
		if p.LockWait == NoWait || p.LockWait > 0 && waited >= p.LockWait {
			f.Close()
			return nil, fmt.Errorf("the xdpfw lock %s is held by %s; gave up after %s (--wait)", path, holder, waited.Round(time.Millisecond))
		}
		if !told && waited >= lockNotice {
			told = true
			msg := fmt.Sprintf("waiting for the xdpfw lock %s, held by %s", path, holder)
			if p.LockWaiting != nil {
				p.LockWaiting(msg)
			} else {
				fmt.Fprintln(os.Stderr, msg)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(holderText()), 0)
	return func() {
		_ = f.Truncate(0)
		f.Close()
	}, nil
}

// holderText is this process as the lock file names it.
func holderText() string {
	args := append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...)
	cmd := strings.Join(args, " ")
	if len(cmd) > 80 {
		cmd = cmd[:77] + "..."
	}
	return fmt.Sprintf("pid %d (%s)\n", os.Getpid(), cmd)
}

// lockHolder says who holds the lock, as its holder wrote it.
func lockHolder(path string) string {
	b, err := readFile(path)
	if s := strings.TrimSpace(string(b)); err == nil && s != "" && len(s) < 200 {
		return s
	}
	return "another process"
}
