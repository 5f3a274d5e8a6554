package daemon

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWatcherWriting: a watched file truncated and written in place counts
// as being written until its writer closes it; a file renamed into place
// never does; other files of the directory are not reported. Run with
// -race: the daemon's loop changes the watched files while the reader
// reads them.
func TestWatcherWriting(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.conf")
	if err := os.WriteFile(rules, []byte("-A INPUT -j ACCEPT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := newWatcher(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.watch([]string{rules})
	event := func(what string) {
		t.Helper()
		select {
		case name := <-w.events:
			if name != rules {
				t.Fatalf("%s: event for %s, want %s", what, name, rules)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no event", what)
		}
	}
	f, err := os.OpenFile(rules, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	event("truncate")
	if got := w.beingWritten(); !slices.Equal(got, []string{rules}) {
		t.Fatalf("truncated and open: being written %v, want %v", got, []string{rules})
	}
	if _, err := f.WriteString("-A INPUT -j DROP\n"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // re-watching (a reload) keeps the state
		w.watch([]string{rules, filepath.Join(dir, "sets.conf")})
	}
	if got := w.beingWritten(); !slices.Equal(got, []string{rules}) {
		t.Fatalf("written and open: being written %v, want %v", got, []string{rules})
	}
	f.Close()
	// The writes and the close come as one or more events; the close is
	// the last.
	for deadline := time.Now().Add(10 * time.Second); len(w.beingWritten()) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("closed: still being written: %v", w.beingWritten())
		}
		event("write or close")
	}

	// Another file of the directory: nothing.
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Renamed into place: one complete change.
	tmp := rules + ".new"
	if err := os.WriteFile(tmp, []byte("-A INPUT -j ACCEPT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for len(w.events) > 0 { // a close event of the write above may be queued still
		<-w.events
	}
	if err := os.Rename(tmp, rules); err != nil {
		t.Fatal(err)
	}
	event("rename")
	if got := w.beingWritten(); len(got) != 0 {
		t.Errorf("renamed into place: being written %v, want none", got)
	}

	// A symlink or a hard link made in place (ln -sf, ln): complete, no
	// close ever comes.
	target := filepath.Join(dir, "rules-v2.conf")
	if err := os.WriteFile(target, []byte("-A INPUT -j DROP\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ln := range []func(string, string) error{os.Symlink, os.Link} {
		if err := os.Remove(rules); err != nil {
			t.Fatal(err)
		}
		event("remove")
		if err := ln(target, rules); err != nil {
			t.Fatal(err)
		}
		event("link")
		if got := w.beingWritten(); len(got) != 0 {
			t.Errorf("linked in place: being written %v, want none", got)
		}
	}
}
