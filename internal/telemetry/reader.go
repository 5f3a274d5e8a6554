package telemetry

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/datapath"
)

// Reader reads log events from the data plane's ring buffer.
//
// A BPF ring buffer has one consumer position: two readers would take
// events from each other (each sees some, none sees all). OpenReader
// therefore takes an exclusive lock, and a second reader (`xdpfw log` while
// the daemon forwards events, or two `xdpfw log`) fails with ErrBusy.
type Reader struct {
	m     *ebpf.Map
	rd    *ringbuf.Reader
	lock  *os.File // nil for NewReader
	rec   ringbuf.Record
	close sync.Once
	err   error // of Close
}

// ErrBusy: another process reads the events.
var ErrBusy = errors.New("another process reads the log events")

// LockFile is the lock a reader holds, in the state directory; it holds
// the reader's pid.
const LockFile = "log.lock"

// OpenReader opens the pinned ring buffer in pinDir for reading, holding
// stateDir/LockFile while open.
func OpenReader(pinDir, stateDir string) (*Reader, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(stateDir, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			return nil, fmt.Errorf("%w (pid %s holds %s): a ring buffer hands each event to one reader; "+
				"stop it first (when the daemon forwards events, read them in the journal instead)", ErrBusy, pid, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	m, err := datapath.OpenLogRing(pinDir)
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := NewReader(m)
	m.Close() // the reader holds its own reference
	if err != nil {
		f.Close()
		return nil, err
	}
	r.lock = f
	return r, nil
}

// NewReader reads ring buffer m (without the lock: for tests and callers
// that hold it themselves).
func NewReader(m *ebpf.Map) (*Reader, error) {
	m, err := m.Clone()
	if err != nil {
		return nil, err
	}
	rd, err := ringbuf.NewReader(m)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("reading the log ring buffer: %w", err)
	}
	return &Reader{m: m, rd: rd}, nil
}

// Next returns the next event. With wait it blocks until one comes (or
// Close is called: os.ErrClosed); without, it returns io.EOF when none is
// waiting.
func (r *Reader) Next(wait bool) (Event, error) {
	if wait {
		r.rd.SetDeadline(time.Time{})
	} else {
		r.rd.SetDeadline(time.Now())
	}
	if err := r.rd.ReadInto(&r.rec); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return Event{}, io.EOF
		}
		if errors.Is(err, ringbuf.ErrClosed) {
			return Event{}, os.ErrClosed
		}
		return Event{}, fmt.Errorf("reading the log ring buffer: %w", err)
	}
	return Decode(r.rec.RawSample)
}

// Close stops the reader (a blocked Next returns) and releases the lock.
// It may be called from another goroutine, and more than once.
func (r *Reader) Close() error {
	r.close.Do(func() {
		r.err = r.rd.Close()
		r.m.Close()
		if r.lock != nil {
			r.lock.Close()
		}
	})
	return r.err
}

// ReaderPID is the pid of the process holding the reader lock in stateDir
// ("" when none), found in /proc/locks: probing the lock by taking it could
// make a reader starting at that instant fail.
func ReaderPID(stateDir string) string {
	var st unix.Stat_t
	if unix.Stat(filepath.Join(stateDir, LockFile), &st) != nil {
		return ""
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	// "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"
	dev := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	for _, line := range strings.Split(string(locks), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == dev {
			return f[4]
		}
	}
	return ""
}
