package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

func openTemp(t *testing.T) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func record(t *testing.T, l *Log, e Entry) {
	t.Helper()
	if err := l.Record(e); err != nil {
		t.Fatal(err)
	}
}

// details returns the Detail of each entry, which the tests use as a name.
func details(es []Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Detail)
	}
	return out
}

func TestRecordConcurrent(t *testing.T) {
	l, path := openTemp(t)
	// A second Log on the same file writes as another process would.
	other, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	const writers, each = 16, 40
	var wg sync.WaitGroup
	for w := range writers {
		log := l
		if w%2 == 1 {
			log = other
		}
		wg.Go(func() {
			for i := range each {
				// Lines of up to about 4 KiB, so that a line written in
				// two pieces would be cut into by another.
				pad := strings.Repeat(string(rune('a'+w)), (w*each+i)*7%4000)
				if err := log.Record(Entry{User: "u" + strconv.Itoa(w), UID: uint32(w), Action: ActionExec,
					Argv: []string{strconv.Itoa(i), pad}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(raw, []byte("\n")) {
		t.Fatal("file does not end with a newline")
	}
	next := make([]int, writers) // the next i expected of each writer
	lines := bytes.Split(raw[:len(raw)-1], []byte("\n"))
	for _, line := range lines {
		e, err := ParseLine(line)
		if err != nil {
			t.Fatalf("line %.80q: %v", line, err)
		}
		w := int(e.UID)
		i, _ := strconv.Atoi(e.Argv[0])
		if i != next[w] {
			t.Fatalf("writer %d: entry %d after %d", w, i, next[w]-1)
		}
		next[w]++
		if want := strings.Repeat(string(rune('a'+w)), (w*each+i)*7%4000); e.Argv[1] != want {
			t.Fatalf("writer %d entry %d: argument of %d bytes, want %d", w, i, len(e.Argv[1]), len(want))
		}
	}
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
	es, skipped, err := l.Read(Filter{}, 0)
	if err != nil || len(es) != writers*each || skipped != 0 {
		t.Fatalf("Read: %d entries, %d skipped, %v", len(es), skipped, err)
	}
}

func TestOpenModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "audit")
	path := filepath.Join(dir, "audit.jsonl")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	record(t, l, Entry{User: "ann", Action: ActionCreate})
	l.Close()
	for p, want := range map[string]fs.FileMode{path: 0o600, dir: 0o700, filepath.Dir(dir): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}

	// An existing file readable by others is tightened, its lines kept.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("reopened: mode %v, want 0600", fi.Mode().Perm())
	}
	record(t, l, Entry{User: "bob", Action: ActionAttach})
	if es, _, _ := l.Read(Filter{}, 0); len(es) != 2 || es[0].User != "ann" || es[1].User != "bob" {
		t.Fatalf("after reopening: %+v", es)
	}

	if _, err := Open(dir); err == nil {
		t.Error("Open of a directory succeeded")
	}
}

func TestRecord(t *testing.T) {
	l, path := openTemp(t)
	before := time.Now()
	record(t, l, Entry{User: "ann", Action: ActionCreate, Detail: "zero time"})
	after := time.Now()
	given := time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("x", 3600))
	record(t, l, Entry{User: "ann", Action: ActionSet, Detail: "a && b > c", Time: given})
	es, _, err := l.Read(Filter{}, 0)
	if err != nil || len(es) != 2 {
		t.Fatalf("%+v %v", es, err)
	}
	if tm := es[0].Time; tm.Location() != time.UTC || tm.Before(before) || tm.After(after) {
		t.Errorf("time set to %v, want UTC between %v and %v", tm, before, after)
	}
	if !es[1].Time.Equal(given) || es[1].Detail != "a && b > c" {
		t.Errorf("second entry %+v", es[1])
	}
	raw, _ := os.ReadFile(path)
	if !bytes.Contains(raw, []byte(`"a && b > c"`)) {
		t.Errorf("HTML characters escaped: %s", raw)
	}

	if err := l.Record(Entry{User: "ann"}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("entry without an action: %v", err)
	}
	if err := l.Record(Entry{User: "ann", Action: ActionExec, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("an entry JSON cannot hold was recorded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := l.Record(Entry{User: "ann", Action: ActionExec}); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Record after Close: %v", err)
	}
	if _, _, err := l.Read(Filter{}, 0); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Read after Close: %v", err)
	}
}

func TestClamp(t *testing.T) {
	l, path := openTemp(t)
	argv := make([]string, 300)
	for i := range argv {
		argv[i] = strconv.Itoa(i)
	}
	argv[1] = strings.Repeat("é", 3000) // 6000 bytes
	orig := append([]string(nil), argv...)
	record(t, l, Entry{User: "ann", Action: ActionExec, Argv: argv, Detail: strings.Repeat("d", 10000), Target: "short"})
	if !reflect.DeepEqual(argv, orig) {
		t.Fatal("Record wrote to the caller's Argv")
	}
	es, skipped, err := l.Read(Filter{}, 0)
	if err != nil || skipped != 0 || len(es) != 1 {
		t.Fatalf("%d entries, %d skipped, %v", len(es), skipped, err)
	}
	e := es[0]
	if len(e.Detail) != fieldMax || !strings.HasPrefix(e.Detail, "ddd") || !strings.HasSuffix(e.Detail, "…") {
		t.Errorf("Detail of %d bytes: %.10q…%q", len(e.Detail), e.Detail, e.Detail[len(e.Detail)-10:])
	}
	if e.Target != "short" {
		t.Errorf("Target %q", e.Target)
	}
	if len(e.Argv) != argvMax || e.Argv[0] != "0" || e.Argv[254] != "254" || e.Argv[255] != "…(45 more)" {
		t.Errorf("Argv of %d items, ending %q", len(e.Argv), e.Argv[len(e.Argv)-2:])
	}
	if a := e.Argv[1]; len(a) > fieldMax || !strings.HasSuffix(a, "é…") {
		t.Errorf("argument of %d bytes ending %q", len(a), a[len(a)-8:])
	}

	// Every field as long as allowed and made of bytes JSON writes as six:
	// the line must still fit, and be read; a refusal's in 1 KiB.
	ctl := strings.Repeat("\x01", fieldMax+1)
	long := make([]string, argvMax+1)
	for i := range long {
		long[i] = ctl
	}
	record(t, l, Entry{User: ctl, Action: ctl, Session: ctl, SessionName: ctl, Owner: ctl, Role: ctl, Target: ctl,
		Argv: long, Detail: ctl})
	record(t, l, Entry{User: ctl, Action: ctl, Session: ctl, SessionName: ctl, Owner: ctl, Role: ctl, Target: ctl,
		Argv: long, Detail: ctl, Error: ctl})
	raw, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	if n := len(lines[1]); n > maxLine {
		t.Errorf("line of %d bytes", n)
	}
	if n := len(lines[2]); n > maxRefusalLine {
		t.Errorf("refusal of %d bytes", n)
	}
	es, skipped, err = l.Read(Filter{}, 0)
	if err != nil || skipped != 0 || len(es) != 3 || !strings.HasPrefix(es[1].Detail, "\x01") || !strings.HasPrefix(es[2].Error, "\x01") {
		t.Fatalf("%d entries, %d skipped, %v", len(es), skipped, err)
	}

	// A refusal keeps a few hundred bytes of what it was asked.
	record(t, l, Entry{User: "ann", Action: ActionExec, Argv: argv, SessionName: strings.Repeat("n", 1000),
		Detail: strings.Repeat("d", 10000), Error: strings.Repeat("e", 10000)})
	es, _, _ = l.Read(Filter{}, 1)
	e = es[0]
	if len(e.Detail) != refusalDetail || len(e.Error) != refusalError || len(e.SessionName) != refusalField ||
		len(e.Argv) != refusalArgv || e.Argv[3] != "…(297 more)" || len(e.Argv[1]) > refusalArg {
		t.Errorf("a refusal kept %d bytes of Detail, %d of Error, %d of its name, Argv %q", len(e.Detail), len(e.Error), len(e.SessionName), e.Argv)
	}
}

func TestFilterMatch(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e := Entry{Time: at, User: "ann", Action: ActionAttach, Session: "5f0c3a8e9b", SessionName: "web", Owner: "bob"}
	onlyBob := func(e Entry) bool { return e.Owner == "bob" }
	for _, c := range []struct {
		name string
		f    Filter
		want bool
	}{
		{"zero", Filter{}, true},
		{"session id", Filter{Session: "5f0c3a8e9b"}, true},
		{"session name", Filter{Session: "web"}, true},
		{"id prefix", Filter{Session: "5f0c"}, true},
		{"id prefix too short", Filter{Session: "5f0"}, false},
		{"name prefix", Filter{Session: "we"}, false},
		{"other session", Filter{Session: "5f0d"}, false},
		{"longer than the id", Filter{Session: "5f0c3a8e9bb"}, false},
		{"user", Filter{User: "ann"}, true},
		{"owner is not who acted", Filter{User: "bob"}, false},
		{"user prefix", Filter{User: "an"}, false},
		{"since before", Filter{Since: at.Add(-time.Second)}, true},
		{"since equal", Filter{Since: at}, true},
		{"since after", Filter{Since: at.Add(time.Nanosecond)}, false},
		{"visible", Filter{Visible: onlyBob}, true},
		{"not visible", Filter{Visible: func(Entry) bool { return false }}, false},
		{"all", Filter{Session: "web", User: "ann", Since: at, Visible: onlyBob}, true},
	} {
		if got := c.f.Match(e); got != c.want {
			t.Errorf("%s: Match = %v, want %v", c.name, got, c.want)
		}
	}
	// Visible is asked only about entries the other fields select.
	asked := 0
	f := Filter{User: "bob", Visible: func(Entry) bool { asked++; return true }}
	if f.Match(e) || asked != 0 {
		t.Errorf("Visible asked %d times about an entry User hides", asked)
	}
}

func TestReadFilterAndN(t *testing.T) {
	l, _ := openTemp(t)
	for i := range 10 {
		user, sess, name := "ann", "aaaa1111", "web"
		if i%2 == 1 {
			user, sess, name = "bob", "bbbb2222", "db"
		}
		record(t, l, Entry{User: user, Action: ActionExec, Session: sess, SessionName: name, Detail: strconv.Itoa(i)})
	}
	for _, c := range []struct {
		f    Filter
		n    int
		want string
	}{
		{Filter{}, 0, "0 1 2 3 4 5 6 7 8 9"},
		{Filter{}, -1, "0 1 2 3 4 5 6 7 8 9"},
		{Filter{}, 3, "7 8 9"},
		{Filter{}, 10, "0 1 2 3 4 5 6 7 8 9"},
		{Filter{}, 11, "0 1 2 3 4 5 6 7 8 9"},
		{Filter{User: "bob"}, 0, "1 3 5 7 9"},
		{Filter{User: "bob"}, 2, "7 9"},
		{Filter{Session: "db"}, 0, "1 3 5 7 9"},
		{Filter{Session: "aaaa"}, 1, "8"},
		{Filter{Session: "aaaa1111", User: "bob"}, 0, ""},
		{Filter{Visible: func(e Entry) bool { return e.Detail < "3" }}, 0, "0 1 2"},
	} {
		es, skipped, err := l.Read(c.f, c.n)
		if got := strings.Join(details(es), " "); err != nil || skipped != 0 || got != c.want {
			t.Errorf("Read(%+v, %d) = %q, %d skipped, %v; want %q", c.f, c.n, got, skipped, err, c.want)
		}
	}
}

func TestDamagedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	good := func(d string) string {
		return `{"time":"2026-01-01T00:00:00Z","user":"ann","uid":1,"action":"create","detail":"` + d + `"}` + "\n"
	}
	content := good("a") +
		"not json\n" +
		`{"time":"2026-01-01T00:00:00Z","detail":"` + strings.Repeat("x", 70<<10) + `","action":"create"}` + "\n" +
		good("b") +
		"null\n" +
		good("c") +
		`{"time":"2026-01-01T00:00:00Z","user":"ann","uid":1,"act` // torn by a crash
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	es, skipped, err := l.Read(Filter{}, 0)
	if got := strings.Join(details(es), " "); err != nil || got != "a b c" || skipped != 4 {
		t.Fatalf("Read = %q, %d skipped, %v; want a b c, 4 skipped", got, skipped, err)
	}
	// The next entry starts on a line of its own; the torn one stays lost.
	record(t, l, Entry{User: "ann", Action: ActionWake, Detail: "d"})
	es, skipped, err = l.Read(Filter{}, 0)
	if got := strings.Join(details(es), " "); err != nil || got != "a b c d" || skipped != 4 {
		t.Fatalf("after Record: %q, %d skipped, %v; want a b c d, 4 skipped", got, skipped, err)
	}
	if es, _, _ := l.Read(Filter{}, 2); strings.Join(details(es), " ") != "c d" {
		t.Fatalf("last 2: %q", details(es))
	}
}

// follower runs ReadFollow in a goroutine and hands over what it gets.
type follower struct {
	got  chan Entry
	done chan error
}

func follow(ctx context.Context, l *Log, f Filter, n int) *follower {
	fl := &follower{got: make(chan Entry, 1000), done: make(chan error, 1)}
	go func() {
		fl.done <- l.ReadFollow(ctx, f, n, func(e Entry) error {
			fl.got <- e
			return nil
		})
	}()
	return fl
}

// want receives the next entries and checks their Details.
func (fl *follower) want(t *testing.T, ds ...string) {
	t.Helper()
	for _, d := range ds {
		select {
		case e := <-fl.got:
			if e.Detail != d {
				t.Fatalf("followed %q, want %q", e.Detail, d)
			}
		case err := <-fl.done:
			t.Fatalf("ReadFollow returned %v, waiting for %q", err, d)
		case <-time.After(5 * time.Second):
			t.Fatalf("nothing followed, waiting for %q", d)
		}
	}
}

// stopped waits for ReadFollow to return and returns its error.
func (fl *follower) stopped(t *testing.T) error {
	t.Helper()
	select {
	case err := <-fl.done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFollow did not return")
		return nil
	}
}

func TestReadFollow(t *testing.T) {
	l, path := openTemp(t)
	for i := range 3 {
		record(t, l, Entry{User: "ann", Action: ActionExec, Detail: "old" + strconv.Itoa(i)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fl := follow(ctx, l, Filter{User: "ann"}, 2)
	fl.want(t, "old1", "old2")

	record(t, l, Entry{User: "ann", Action: ActionExec, Detail: "new0"})
	record(t, l, Entry{User: "bob", Action: ActionExec, Detail: "bob's"})
	record(t, l, Entry{User: "ann", Action: ActionExec, Detail: "new1"})
	fl.want(t, "new0", "new1")

	// What another process appends is read from the file, in file order,
	// once this Log appends.
	other, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	record(t, other, Entry{User: "ann", Action: ActionExec, Detail: "other"})
	record(t, l, Entry{User: "ann", Action: ActionExec, Detail: "new2"})
	fl.want(t, "other", "new2")

	cancel()
	if err := fl.stopped(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	if len(fl.got) != 0 {
		t.Fatalf("followed %q twice or after the rest", (<-fl.got).Detail)
	}
}

// TestReadFollowNoGap starts followers while a writer appends, and checks
// that each gets every entry once, in order, wherever it started.
func TestReadFollowNoGap(t *testing.T) {
	l, _ := openTemp(t)
	const total = 400
	var wg sync.WaitGroup
	recorded := make(chan int, total)
	wg.Go(func() {
		for i := range total {
			if err := l.Record(Entry{User: "ann", Action: ActionExec, Detail: strconv.Itoa(i)}); err != nil {
				t.Error(err)
				return
			}
			recorded <- i
		}
	})
	errDone := errors.New("done")
	// A follower that misses an entry fails at the deadline, not hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	starts := map[int]bool{0: true, 50: true, 120: true, 200: true, 333: true}
	errs := make(chan error, len(starts))
	for i := range total {
		<-recorded
		if !starts[i] {
			continue
		}
		wg.Go(func() {
			next := 0
			err := l.ReadFollow(ctx, Filter{}, 0, func(e Entry) error {
				if e.Detail != strconv.Itoa(next) {
					return fmt.Errorf("follower started at %d: got %s, want %d", i, e.Detail, next)
				}
				next++
				if next == total {
					return errDone
				}
				return nil
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != errDone {
			t.Error(err)
		}
	}
}

// TestReadFollowBetweenParts appends while ReadFollow reads the old
// entries (Visible holds it there): the new entry must come once, after them.
func TestReadFollowBetweenParts(t *testing.T) {
	l, _ := openTemp(t)
	record(t, l, Entry{User: "ann", Action: ActionExec, Detail: "a"})
	inRead, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f := Filter{Visible: func(e Entry) bool {
		once.Do(func() {
			close(inRead)
			<-resume
		})
		return true
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fl := follow(ctx, l, f, 0)
	<-inRead
	record(t, l, Entry{User: "ann", Action: ActionExec, Detail: "b"})
	close(resume)
	fl.want(t, "a", "b")
	record(t, l, Entry{User: "ann", Action: ActionExec, Detail: "c"})
	fl.want(t, "c")
	cancel()
	if err := fl.stopped(t); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if len(fl.got) != 0 {
		t.Fatalf("followed %q twice or after the rest", (<-fl.got).Detail)
	}
}

func TestReadFollowStops(t *testing.T) {
	l, _ := openTemp(t)
	record(t, l, Entry{User: "ann", Action: ActionExec, Detail: "a"})

	// An error of fn is returned as it is, from the old entries or the new.
	errStop := errors.New("stop")
	if err := l.ReadFollow(context.Background(), Filter{}, 0, func(Entry) error { return errStop }); err != errStop {
		t.Errorf("fn's error on an old entry: ReadFollow returned %v", err)
	}
	fnErr := make(chan error, 1)
	go func() {
		fnErr <- l.ReadFollow(context.Background(), Filter{Session: "s1"}, 0, func(Entry) error { return errStop })
	}()
	record(t, l, Entry{User: "ann", Action: ActionExec, Session: "s1", Detail: "b"})
	select {
	case err := <-fnErr:
		if err != errStop {
			t.Errorf("fn's error on a new entry: ReadFollow returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFollow did not return fn's error")
	}

	// A context already done: nothing is followed.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.ReadFollow(ctx, Filter{Session: "none"}, 0, func(Entry) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("done context: %v", err)
	}

	// Close ends a follower waiting for more.
	fl := follow(context.Background(), l, Filter{}, 0)
	fl.want(t, "a", "b")
	l.Close()
	if err := fl.stopped(t); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := l.ReadFollow(context.Background(), Filter{}, 0, func(Entry) error { return nil }); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("ReadFollow after Close: %v", err)
	}
}

// parseCases are lines ParseLine accepts or refuses; FuzzParseLine is seeded
// with them.
var parseCases = []struct {
	line string
	ok   bool
}{
	{`{"time":"2026-01-01T00:00:00Z","user":"ann","uid":1000,"action":"create"}`, true},
	{`{"time":"2026-11-29T18:00:00.123456789+01:00","user":"ann","uid":1000,"action":"exec","session":"5f0c3a8e9b","session_name":"web","owner":"bob","role":"drive","target":"cy","argv":["sh","-c","a && b > \"c\"\n"],"detail":"é \u2028 \u0001 \ud83d\ude00","admin":true,"error":"refused"}` + "\n", true},
	{` {"action":"rm","time":"2026-01-01T00:00:00Z"} `, true},
	{`{"time":"2026-01-01T00:00:00Z","action":"x","argv":[]}`, true},
	{`{"time":"2026-01-01T00:00:00Z","action":"x","argv":[null]}`, true},
	{`{"time":"2026-01-01T00:00:00Z","action":"x","future_field":{"a":[1]}}`, true},
	{`{"time":"2026-01-01T00:00:00Z","action":"x","detail":"` + "\xff<>&" + `"}`, true}, // a byte not UTF-8
	{``, false},
	{`null`, false},
	{`[]`, false},
	{`{}`, false},
	{`"text"`, false},
	{`not json`, false},
	{`{"time":"2026-01-01T00:00:00Z"}`, false},
	{`{"action":"create"}`, false},
	{`{"time":"2026-01-01T00:00:00Z","action":""}`, false},
	{`{"time":"2026-01-01T00:00:00Z","user":"ann","uid":1000,"act`, false},
	{`{"time":"2026-01-01T00:00:00Z","action":"x"}x`, false},
	{`{"time":"2026-01-01T00:00:00Z","action":"x"}{"time":"2026-01-01T00:00:00Z","action":"y"}`, false},
	{`{"time":"2026-01-01T00:00:00Z","action":"x","uid":-1}`, false},
	{`{"time":"2026-01-01T00:00:00Z","action":"x","uid":"1"}`, false},
	{`{"time":"2026-01-01","action":"x"}`, false},
	{`{"time":"2026-01-01T00:00:00Z","action":"x","argv":"ls"}`, false},
	{`{"time":"2026-01-01T00:00:00Z","action":"x","detail":"` + strings.Repeat("x", maxLine) + `"}`, false},
}

func TestParseLine(t *testing.T) {
	for _, c := range parseCases {
		e, err := ParseLine([]byte(c.line))
		if (err == nil) != c.ok {
			t.Errorf("ParseLine(%.80q) = %+v, %v; want ok %v", c.line, e, err, c.ok)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("ParseLine(%.80q): %v does not wrap ErrInvalid", c.line, err)
		}
	}
	e, err := ParseLine([]byte(parseCases[1].line))
	want := Entry{Time: time.Date(2026, 11, 29, 17, 0, 0, 123456789, time.UTC), User: "ann", UID: 1000, Action: ActionExec,
		Session: "5f0c3a8e9b", SessionName: "web", Owner: "bob", Role: "drive", Target: "cy",
		Argv: []string{"sh", "-c", "a && b > \"c\"\n"}, Detail: "é \u2028 \x01 😀", Admin: true, Error: "refused"}
	if err != nil || !sameEntry(e, want) {
		t.Errorf("ParseLine = %+v, %v\nwant %+v", e, err, want)
	}
}

// sameEntry reports whether a and b are equal, their times as instants.
func sameEntry(a, b Entry) bool {
	if !a.Time.Equal(b.Time) {
		return false
	}
	a.Time, b.Time = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}
