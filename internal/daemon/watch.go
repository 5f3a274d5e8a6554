package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watcher reports changes of the watched files, and which of them are
// being written now. It watches their directories, not the files: editors
// and Kubernetes ConfigMaps replace a file by renaming another over it,
// which a watch on the file itself loses.
//
// A file counts as being written from the moment it is modified or
// created (a shell's `>` truncates first: that is a modification) until
// the writer closes it (IN_CLOSE_WRITE) or another file is renamed over it
// (IN_MOVED_TO). The daemon never reloads while a watched file is being
// written, so it never reads one half-written, however slowly the writer
// goes. It uses inotify directly because fsnotify keeps IN_CLOSE_WRITE
// unexported.
type watcher struct {
	ino    *os.File // the inotify descriptor, non-blocking (Close wakes the reader)
	fd     int      // its number (ino.Fd would make it blocking)
	log    *slog.Logger
	events chan string // a watched file changed (its name)
	wg     sync.WaitGroup

	mu      sync.Mutex // guards what follows: watch (the daemon's loop) and read (the reader) share it
	files   map[string]bool
	dirs    map[string]int // directory -> watch descriptor
	writing map[string]bool
}

// inotifyMask: every way a file in a directory changes.
const inotifyMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO |
	unix.IN_MOVED_FROM | unix.IN_DELETE | unix.IN_ONLYDIR

func newWatcher(log *slog.Logger) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watching files: inotify: %w", err)
	}
	w := &watcher{ino: os.NewFile(uintptr(fd), "inotify"), fd: fd, log: log, events: make(chan string, 16),
		files: map[string]bool{}, dirs: map[string]int{}, writing: map[string]bool{}}
	w.wg.Go(w.read)
	return w, nil
}

// watch replaces the watched files (absolute paths).
func (w *watcher) watch(files []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.files = map[string]bool{}
	var dirs []string
	for _, f := range files {
		w.files[f] = true
		if d := filepath.Dir(f); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for f := range w.writing {
		if !w.files[f] {
			delete(w.writing, f)
		}
	}
	for d, wd := range w.dirs {
		if !slices.Contains(dirs, d) {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
			delete(w.dirs, d)
		}
	}
	for _, d := range dirs {
		if _, ok := w.dirs[d]; ok {
			continue
		}
		wd, err := unix.InotifyAddWatch(w.fd, d, inotifyMask)
		if err != nil {
			w.log.Warn("cannot watch a directory; changes there need SIGHUP", "dir", d, "error", err.Error())
			continue
		}
		w.dirs[d] = wd
	}
}

// beingWritten lists the watched files modified and not closed since.
func (w *watcher) beingWritten() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for f := range w.writing {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// read turns inotify events into w.events and w.writing until close.
func (w *watcher) read() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.ino.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.log.Warn("file watch stopped; changes need SIGHUP", "error", err.Error())
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				w.overflow()
				continue
			}
			w.event(int(ev.Wd), strings.TrimRight(string(name), "\x00"), ev.Mask)
		}
	}
}

// event handles one inotify event on a file of a watched directory.
func (w *watcher) event(wd int, name string, mask uint32) {
	w.mu.Lock()
	dir := ""
	for d, x := range w.dirs {
		if x == wd {
			dir = d
		}
	}
	path := filepath.Join(dir, name)
	// A watched file, or a Kubernetes ConfigMap's "..data" swap (complete
	// when it happens: a symlink renamed into place).
	watched := dir != "" && (w.files[path] || strings.HasPrefix(name, ".."))
	if watched && w.files[path] {
		switch {
		case mask&unix.IN_CREATE != 0 && !openedToWrite(path):
			delete(w.writing, path) // a symlink or a hard link made in place: complete
		case mask&(unix.IN_MODIFY|unix.IN_CREATE) != 0:
			if !w.writing[path] {
				w.log.Debug("file being written; the reload waits until it is closed", "file", path)
			}
			w.writing[path] = true
		default: // closed after writing, renamed into place, removed
			delete(w.writing, path)
		}
	}
	w.mu.Unlock()
	if watched {
		w.notify(path)
	}
}

// openedToWrite says whether a file just created at path was created by
// open(2) (and will be closed after writing, IN_CLOSE_WRITE): a regular
// file with one link. A symlink (ln -sf) or a hard link (ln) made in place
// is complete at once, and no close would ever come.
func openedToWrite(path string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return false // gone already
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1
}

// overflow: events were lost; nothing is known to be half-written, but
// something may have changed.
func (w *watcher) overflow() {
	w.log.Warn("file watch: inotify queue overflowed; reloading")
	w.notify("(inotify overflow)")
}

func (w *watcher) notify(name string) {
	select {
	case w.events <- name:
	default: // a reload is pending already
	}
}

func (w *watcher) close() {
	w.ino.Close()
	w.wg.Wait()
}
