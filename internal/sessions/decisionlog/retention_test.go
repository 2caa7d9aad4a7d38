package decisionlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// retained opens a Dir with caps but no sweeper goroutine: the tests
// sweep when they choose.
func retained(t *testing.T, r Retention) (*Dir, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "logs")
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	d.ret = r
	t.Cleanup(func() { d.Close() })
	return d, dir
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func dirSize(t *testing.T, dir, prefix string) int64 {
	var n int64
	for _, f := range files(t, dir) {
		if strings.HasPrefix(f, prefix+".jsonl") {
			fi, _ := os.Stat(filepath.Join(dir, f))
			n += fi.Size()
		}
	}
	return n
}

var day0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func line(i int) Entry {
	return Entry{Time: day0.Add(time.Duration(i) * time.Minute), Session: "s1", RequestID: fmt.Sprintf("req_%04d", i),
		Method: "POST", Path: "/v1/messages", Decision: "forwarded", Status: 200, Model: "claude-x",
		InputTokens: 10, OutputTokens: int64(i), CacheReadTokens: 1}
}

func TestRotateBySize(t *testing.T) {
	const maxSize = 8 << 10
	d, dir := retained(t, Retention{MaxSize: maxSize})
	var want int64
	for i := range 400 {
		e := line(i)
		d.Record(e)
		want += e.InputTokens + e.OutputTokens
		if i%50 == 0 {
			if err := d.Sweep("s1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	d.Record(Entry{Time: day0, Session: "s2", RequestID: "other"}) // another session's log is its own
	if err := d.Sweep("s1"); err != nil {
		t.Fatal(err)
	}
	if n := dirSize(t, dir, "s1"); n > maxSize+maxSize/4 {
		t.Fatalf("the log holds %d bytes, cap %d: %v", n, maxSize, files(t, dir))
	}
	fs := files(t, dir)
	if !contains(fs, "s1.carry.json") || !contains(fs, "s1.jsonl") || !contains(fs, "s2.jsonl") || contains(fs, "s1.jsonl.1") {
		t.Fatalf("files: %v", fs)
	}
	l, err := d.ReadLog("s1")
	if err != nil {
		t.Fatal(err)
	}
	// The lines kept are the newest, in order, and with the carry they
	// count every token written.
	if len(l.Entries) == 0 || l.Entries[len(l.Entries)-1].RequestID != "req_0399" {
		t.Fatalf("%d lines kept", len(l.Entries))
	}
	first := 400 - len(l.Entries)
	for i, e := range l.Entries {
		if e.RequestID != fmt.Sprintf("req_%04d", first+i) {
			t.Fatalf("line %d is %s, want req_%04d", i, e.RequestID, first+i)
		}
	}
	if l.Tokens() != want || l.Carried.Lines != int64(first) || l.Carried.Totals.Requests != int64(first) {
		t.Fatalf("tokens %d, want %d; carried %d lines (%+v)", l.Tokens(), want, l.Carried.Lines, l.Carried.Totals)
	}
	if got, _ := d.Read("s1", 0); len(got) != len(l.Entries) {
		t.Fatalf("Read gave %d lines, ReadLog %d", len(got), len(l.Entries))
	}
	if got, _ := d.Read("s1", 3); len(got) != 3 || got[2].RequestID != "req_0399" {
		t.Fatalf("tail: %v", got)
	}

	// A new Dir on the same files (a Runner restart) reads the same.
	d.Close()
	d2, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	l2, err := d2.ReadLog("s1")
	if err != nil || l2.Tokens() != want || len(l2.Entries) != len(l.Entries) {
		t.Fatalf("after a restart: %v %d tokens, %d lines", err, l2.Tokens(), len(l2.Entries))
	}
	// It goes on numbering parts after the last.
	d2.ret = Retention{MaxSize: maxSize}
	for i := 400; i < 500; i++ {
		d2.Record(line(i))
		want += line(i).InputTokens + line(i).OutputTokens
	}
	if err := d2.Sweep("s1"); err != nil {
		t.Fatal(err)
	}
	l3, err := d2.ReadLog("s1")
	if err != nil || l3.Tokens() != want || l3.Entries[len(l3.Entries)-1].RequestID != "req_0499" {
		t.Fatalf("%v %d tokens, want %d", err, l3.Tokens(), want)
	}
	if l3.Carried.Through <= l.Carried.Through {
		t.Fatalf("through %d, then %d", l.Carried.Through, l3.Carried.Through)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestRetentionAge(t *testing.T) {
	d, dir := retained(t, Retention{MaxAge: 24 * time.Hour})
	now := day0
	d.now = func() time.Time { return now }
	// Lines over two days; a part is rotated every 6 hours of lines.
	for i := 0; i < 48; i++ {
		e := line(0)
		e.Time, e.RequestID = day0.Add(time.Duration(i)*time.Hour), fmt.Sprintf("h%02d", i)
		d.Record(e)
	}
	ns, _ := d.parts("s1")
	if len(ns) < 6 {
		t.Fatalf("parts %v: the age did not rotate", ns)
	}
	// The parts' files carry the times of their last lines.
	for _, n := range ns {
		l, _ := d.readPart(n)
		at := l[len(l)-1].Time
		if err := os.Chtimes(d.partFile("s1", n), at, at); err != nil {
			t.Fatal(err)
		}
	}
	now = day0.Add(48 * time.Hour)
	if err := d.Sweep("s1"); err != nil {
		t.Fatal(err)
	}
	l, err := d.ReadLog("s1")
	if err != nil {
		t.Fatal(err)
	}
	// Every line of the last 24 hours is kept; none is a day older than the
	// cap plus a part.
	oldest := l.Entries[0].Time
	if oldest.After(now.Add(-24*time.Hour)) || oldest.Before(now.Add(-24*time.Hour-6*time.Hour-time.Hour)) {
		t.Fatalf("oldest line kept: %v (now %v)", oldest, now)
	}
	if got := int64(len(l.Entries)) + l.Carried.Lines; got != 48 {
		t.Fatalf("%d lines kept + carried, want 48", got)
	}
	if len(l.Carried.Days) != 2 || l.Carried.Days["2026-12-01"].Requests == 0 {
		t.Fatalf("days: %+v", l.Carried.Days)
	}

	// An idle session: its part being written is rotated and dropped too.
	at := day0.Add(47 * time.Hour)
	os.Chtimes(filepath.Join(dir, "s1.jsonl"), at, at)
	now = day0.Add(100 * time.Hour)
	if err := d.Sweep("s1"); err != nil {
		t.Fatal(err)
	}
	l, err = d.ReadLog("s1")
	if err != nil || len(l.Entries) != 0 || l.Carried.Lines != 48 || l.Carried.Totals.Tokens() != 48*10 {
		t.Fatalf("%v: %d lines kept, %d carried, %d tokens", err, len(l.Entries), l.Carried.Lines, l.Carried.Totals.Tokens())
	}
	// The next line starts a new part.
	d.Record(line(1))
	if l, _ := d.ReadLog("s1"); len(l.Entries) != 1 {
		t.Fatalf("%d lines after a new one", len(l.Entries))
	}
}

// readPart reads one rotated part of s1 (a test's look inside).
func (d *Dir) readPart(n int) ([]Entry, error) {
	f, err := os.Open(d.partFile("s1", n))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	return out, eachEntry(f, func(e *Entry) { out = append(out, *e) })
}

// A crash after the carry was saved and before the part was removed: the
// part is neither read nor counted again.
func TestCarryCrashBetween(t *testing.T) {
	d, dir := retained(t, Retention{MaxSize: 64 << 10})
	for i := range 5 {
		d.Record(line(i))
	}
	d.mu.Lock()
	if err := d.rotate("s1"); err != nil {
		t.Fatal(err)
	}
	d.mu.Unlock()
	d.Record(line(5))
	c := Carry{Version: CarryVersion, Through: 1}
	for i := range 5 {
		e := line(i)
		c.add(&e)
	}
	d.ret.MaxSize = 1 // as if part 1 was folded in by a sweep that then crashed
	if err := d.saveCarryForTest("s1", c); err != nil {
		t.Fatal(err)
	}
	l, err := d.ReadLog("s1")
	if err != nil || len(l.Entries) != 1 || l.Tokens() != 6*10+0+1+2+3+4+5 {
		t.Fatalf("%v: %d lines, %d tokens", err, len(l.Entries), l.Tokens())
	}
	d.ret.MaxSize = 64 << 10
	if err := d.Sweep("s1"); err != nil {
		t.Fatal(err)
	}
	if fs := files(t, dir); contains(fs, "s1.jsonl.1") {
		t.Fatalf("the folded part stayed: %v", fs)
	}
	if l2, _ := d.ReadLog("s1"); l2.Tokens() != l.Tokens() {
		t.Fatalf("tokens %d, then %d", l.Tokens(), l2.Tokens())
	}
}

func (d *Dir) saveCarryForTest(session string, c Carry) error {
	b := fmt.Sprintf(`{"version":%d,"through":%d,"lines":%d,"totals":{"requests":%d,"input_tokens":%d,"output_tokens":%d}}`,
		c.Version, c.Through, c.Lines, c.Totals.Requests, c.Totals.InputTokens, c.Totals.OutputTokens)
	return os.WriteFile(d.carryFile(session), []byte(b), 0o600)
}

func TestDamagedCarry(t *testing.T) {
	d, dir := retained(t, Retention{MaxSize: 64 << 10})
	d.Record(line(1))
	os.WriteFile(filepath.Join(dir, "s1.carry.json"), []byte("{garbage"), 0o600)
	_, err := d.ReadLog("s1")
	if err == nil || !strings.Contains(err.Error(), "remove it to count them as 0") {
		t.Fatalf("%v", err)
	}
	if err := d.Sweep("s1"); err == nil {
		t.Fatal("a sweep went on over a damaged carry")
	}
	if err := d.Remove("s1"); err != nil {
		t.Fatal(err)
	}
	if fs := files(t, dir); len(fs) != 0 {
		t.Fatalf("Remove left %v", fs)
	}
}

func TestPartOf(t *testing.T) {
	for name, want := range map[string]string{
		"s1.jsonl.1": "s1/1", "s1.jsonl.12": "s1/12", "a.jsonl.b.jsonl.3": "a.jsonl.b/3",
		"s1.jsonl": "", "s1.jsonl.": "", "s1.jsonl.01": "", "s1.jsonl.1x": "", "s1.carry.json": "", ".jsonl.1": "",
		"s1.jsonl.99999999999999999999": "",
	} {
		s, n, ok := partOf(name)
		got := ""
		if ok {
			got = fmt.Sprintf("%s/%d", s, n)
		}
		if got != want {
			t.Errorf("partOf(%q) = %q, want %q", name, got, want)
		}
	}
}

// Writers, sweeps and readers at once: every line is read or carried, once.
func TestRetentionConcurrent(t *testing.T) {
	d, _ := retained(t, Retention{})
	d.SetRetention(Retention{MaxSize: 64 << 10}) // with the sweeper
	var wg sync.WaitGroup
	const writers, each = 4, 400
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := line(i)
				e.RequestID = fmt.Sprintf("w%d-%d", w, i)
				e.OutputTokens = 1
				d.Record(e)
			}
		}()
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			l, err := d.ReadLog("s1")
			if err != nil {
				t.Error(err)
				return
			}
			if n := l.Carried.Lines + int64(len(l.Entries)); n > writers*each {
				t.Errorf("%d lines read and carried, more than written", n)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	if err := d.Sweep("s1"); err != nil {
		t.Fatal(err)
	}
	l, err := d.ReadLog("s1")
	if err != nil || l.Carried.Lines+int64(len(l.Entries)) != writers*each || l.Tokens() != writers*each*11 {
		t.Fatalf("%v: %d carried + %d kept, %d tokens", err, l.Carried.Lines, len(l.Entries), l.Tokens())
	}
}
