package decisionlog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Retention caps each session's log; a zero field is no cap.
//
// A session's log is <session>.jsonl, the part being written, and its
// rotated parts <session>.jsonl.<n>, n = 1, 2, … in the order they were
// rotated (never renumbered). The part being written is rotated when it
// would grow past a quarter of MaxSize, or when its first line is older
// than a quarter of MaxAge. The sweeper then drops rotated parts, oldest
// first, while the log is over MaxSize or the part's newest line is older
// than MaxAge. A line is so kept at least MaxAge (and at most about
// 1¼ MaxAge, while the session writes), and the log holds at most MaxSize
// plus a part.
//
// What a dropped part counted is carried over in <session>.carry.json
// (Carry): tokens and requests, in all, per UTC day and per model, so that
// a budget (in tokens or money) and a day's usage read back after a
// restart stay right. The
// carry is written (atomically) before the part is removed, and names the
// last part it holds: a crash between the two never counts a part twice.
type Retention struct {
	MaxSize int64
	MaxAge  time.Duration
}

// CarryVersion is the version of the carry file's format.
const CarryVersion = 1

// Carry is what the rotated-away parts of a session's log counted.
type Carry struct {
	Version int `json:"version"`
	// Through is the last part folded in: parts 1 … Through are gone.
	Through int `json:"through"`
	// Lines is how many lines the parts held; Since and Until are the
	// times of the first and last of them.
	Lines  int64     `json:"lines"`
	Since  time.Time `json:"since,omitzero"`
	Until  time.Time `json:"until,omitzero"`
	Totals Totals    `json:"totals"`
	// Days are the totals by UTC day, "2006-01-02".
	Days map[string]Totals `json:"days,omitempty"`
	// Models are the credential proxy's totals by model (of at most
	// maxCarriedModels models; the rest under ""), so that a budget in
	// money can price what was rotated away.
	Models map[string]Totals `json:"models,omitempty"`
}

// maxCarriedModels bounds Carry.Models: the model is the box's choice.
const maxCarriedModels = 256

// Totals are what a set of lines counted. Requests counts the credential
// proxy's lines, Egress the egress proxy's.
type Totals struct {
	Requests            int64 `json:"requests,omitempty"`
	Egress              int64 `json:"egress,omitempty"`
	InputTokens         int64 `json:"input_tokens,omitempty"`
	OutputTokens        int64 `json:"output_tokens,omitempty"`
	CacheReadTokens     int64 `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_tokens,omitempty"`
}

// Tokens is input plus output tokens: what a token budget counts.
func (t Totals) Tokens() int64 { return t.InputTokens + t.OutputTokens }

// Add counts e.
func (t *Totals) Add(e *Entry) {
	if e.Kind == "" {
		t.Requests++
	} else {
		t.Egress++
	}
	t.InputTokens += e.InputTokens
	t.OutputTokens += e.OutputTokens
	t.CacheReadTokens += e.CacheReadTokens
	t.CacheCreationTokens += e.CacheCreationTokens
}

func (c *Carry) add(e *Entry) {
	c.Lines++
	if c.Since.IsZero() || e.Time.Before(c.Since) {
		c.Since = e.Time
	}
	if e.Time.After(c.Until) {
		c.Until = e.Time
	}
	c.Totals.Add(e)
	if c.Days == nil {
		c.Days = map[string]Totals{}
	}
	day := e.Time.UTC().Format(time.DateOnly)
	t := c.Days[day]
	t.Add(e)
	c.Days[day] = t
	if e.Kind == "" && e.InputTokens+e.OutputTokens+e.CacheReadTokens+e.CacheCreationTokens > 0 {
		if c.Models == nil {
			c.Models = map[string]Totals{}
		}
		m := e.Model
		if _, ok := c.Models[m]; !ok && len(c.Models) >= maxCarriedModels {
			m = ""
		}
		t := c.Models[m]
		t.Add(e)
		c.Models[m] = t
	}
}

// Log is a session's log as read back: what its dropped parts counted,
// and the lines still kept, oldest first.
type Log struct {
	Carried Carry
	Entries []Entry
}

// Tokens is the session's input plus output tokens, dropped parts included.
func (l *Log) Tokens() int64 {
	n := l.Carried.Totals.Tokens()
	for i := range l.Entries {
		n += l.Entries[i].InputTokens + l.Entries[i].OutputTokens
	}
	return n
}

// fileState is what Record knows of a session's part being written.
type fileState struct {
	size int64
	born time.Time // its first line's time
	last int       // the highest rotated part's number
}

// SetRetention sets the caps and starts the sweeper, which works in the
// background (after a rotation, and every sweepEvery for age); Close stops
// it. Calling it again changes the caps.
func (d *Dir) SetRetention(r Retention) {
	d.mu.Lock()
	d.ret = r
	start := d.kick == nil && (r.MaxSize > 0 || r.MaxAge > 0)
	if start {
		d.kick = make(chan struct{}, 1)
		d.done = make(chan struct{})
		d.sweeping.Add(1)
	}
	kick, done := d.kick, d.done
	d.mu.Unlock()
	if start {
		go d.sweeper(kick, done)
	}
}

// sweepEvery is how often the sweeper looks at every session's log for age.
const sweepEvery = 10 * time.Minute

func (d *Dir) sweeper(kick, done <-chan struct{}) {
	defer d.sweeping.Done()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	all := true // at start: every session, for age
	for {
		if all {
			d.SweepAll()
		} else {
			d.mu.Lock()
			due := d.due
			d.due = nil
			d.mu.Unlock()
			for s := range due {
				if err := d.Sweep(s); err != nil {
					d.sweepFailed(err)
				}
			}
		}
		select {
		case <-done:
			return
		case <-kick:
			all = false
		case <-t.C:
			all = true
		}
	}
}

// SweepAll sweeps every session's log in the directory.
func (d *Dir) SweepAll() {
	names, err := os.ReadDir(d.path)
	if err != nil {
		d.sweepFailed(err)
		return
	}
	seen := map[string]bool{}
	for _, n := range names {
		s, _, ok := partOf(n.Name())
		if !ok {
			s, ok = strings.CutSuffix(n.Name(), ".jsonl")
		}
		if ok && validSession(s) && !seen[s] {
			seen[s] = true
			if err := d.Sweep(s); err != nil {
				d.sweepFailed(err)
			}
		}
	}
}

// sweepFailed tells OnError that a sweep failed: the log then keeps
// more than its caps until a later sweep succeeds; nothing is lost.
func (d *Dir) sweepFailed(err error) {
	if d.OnError != nil {
		d.OnError(fmt.Errorf("apply the decision log's retention (logs.max_size, logs.max_age); the log is kept whole meanwhile: %w", err))
	}
}

// partOf parses a rotated part's file name.
func partOf(name string) (session string, n int, ok bool) {
	i := strings.LastIndex(name, ".jsonl.")
	if i <= 0 {
		return "", 0, false
	}
	num := name[i+len(".jsonl."):]
	if num == "" || num[0] == '0' || strings.Trim(num, "0123456789") != "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	return name[:i], n, err == nil
}

// parts lists the session's rotated parts, oldest first.
func (d *Dir) parts(session string) ([]int, error) {
	names, err := filepath.Glob(filepath.Join(d.path, session+".jsonl.*"))
	if err != nil {
		return nil, err
	}
	var ns []int
	for _, p := range names {
		if s, n, ok := partOf(filepath.Base(p)); ok && s == session {
			ns = append(ns, n)
		}
	}
	sort.Ints(ns)
	return ns, nil
}

func (d *Dir) file(session string) string { return filepath.Join(d.path, session+".jsonl") }

func (d *Dir) partFile(session string, n int) string {
	return filepath.Join(d.path, session+".jsonl."+strconv.Itoa(n))
}

func (d *Dir) carryFile(session string) string {
	return filepath.Join(d.path, session+".carry.json")
}

// loadCarry reads the session's carry; none is a zero Carry.
func (d *Dir) loadCarry(session string) (Carry, error) {
	b, err := os.ReadFile(d.carryFile(session))
	if errors.Is(err, fs.ErrNotExist) {
		return Carry{Version: CarryVersion}, nil
	}
	if err != nil {
		return Carry{}, err
	}
	var c Carry
	if err := json.Unmarshal(b, &c); err != nil || c.Version != CarryVersion {
		// Never guessed at: a budget read back from a damaged carry would
		// be wrong either way, so the log is not read until it is fixed.
		return Carry{}, fmt.Errorf("%s: not a carry file of version %d (the token totals of the session's dropped log parts); restore it, or remove it to count them as 0", d.carryFile(session), CarryVersion)
	}
	return c, nil
}

// current returns the session's part being written, opened or rotated as
// needed for a line of next bytes at time at. Under mu.
func (d *Dir) current(session string, next int, at time.Time) (*os.File, error) {
	f, st := d.files[session], d.state[session]
	if f != nil && d.rotateDue(st, next, at) {
		if err := d.rotate(session); err != nil {
			d.fail(err) // the line still goes into the part as it is
		} else {
			f = nil
		}
	}
	if f != nil {
		return f, nil
	}
	f, err := os.OpenFile(d.file(session), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	st = &fileState{}
	if fi, err := f.Stat(); err == nil {
		st.size = fi.Size()
		if st.size > 0 {
			st.born = firstTime(d.file(session), fi.ModTime())
		}
	}
	if ns, err := d.parts(session); err == nil && len(ns) > 0 {
		st.last = ns[len(ns)-1]
	}
	d.files[session], d.state[session] = f, st
	return f, nil
}

// rotateDue reports whether the part being written is rotated before a
// line of next bytes at time at.
func (d *Dir) rotateDue(st *fileState, next int, at time.Time) bool {
	if st == nil || st.size == 0 {
		return false
	}
	if d.ret.MaxSize > 0 && st.size+int64(next) > d.ret.MaxSize/4 {
		return true
	}
	return d.ret.MaxAge > 0 && !st.born.IsZero() && at.Sub(st.born) > d.ret.MaxAge/4
}

// rotate renames the session's part being written to the next rotated
// part and has the sweeper look at the log. Under mu.
func (d *Dir) rotate(session string) error {
	st := d.state[session]
	if f := d.files[session]; f != nil {
		f.Close()
	}
	delete(d.files, session)
	delete(d.state, session)
	d.torn[session] = false
	last := 0
	if st != nil {
		last = st.last
	}
	if err := os.Rename(d.file(session), d.partFile(session, last+1)); err != nil {
		return fmt.Errorf("rotate the decision log: %w", err)
	}
	if d.kick != nil {
		if d.due == nil {
			d.due = map[string]bool{}
		}
		d.due[session] = true
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// grew notes n bytes written at time at to the session's part. Under mu.
func (d *Dir) grew(session string, n int, at time.Time) {
	if st := d.state[session]; st != nil {
		if st.size == 0 {
			st.born = at
		}
		st.size += int64(n)
	}
}

// firstTime is the time of a file's first line, or else def.
func firstTime(path string, def time.Time) time.Time {
	f, err := os.Open(path)
	if err != nil {
		return def
	}
	defer f.Close()
	l, err := readLine(bufio.NewReaderSize(f, 4096), 64<<10)
	var e struct {
		Time time.Time `json:"time"`
	}
	if (err == nil || err == io.EOF) && json.Unmarshal(l, &e) == nil && !e.Time.IsZero() {
		return e.Time
	}
	return def
}

// Sweep applies the retention caps to one session's log: it rotates a
// part being written that has had no line for MaxAge, and drops rotated
// parts, oldest first, that break a cap, their counts carried over.
func (d *Dir) Sweep(session string) error {
	if !validSession(session) {
		return fmt.Errorf("session id %q: %w", session, errdefs.ErrInvalid)
	}
	d.sweepMu.Lock()
	defer d.sweepMu.Unlock()
	d.mu.Lock()
	ret := d.ret
	now := d.clock()
	if ret.MaxAge > 0 {
		if fi, err := os.Stat(d.file(session)); err == nil && fi.Size() > 0 && now.Sub(fi.ModTime()) > ret.MaxAge {
			if _, open := d.files[session]; !open {
				// current reads the parts' numbers; a closed file needs them too
				if _, err := d.current(session, 0, now); err != nil {
					d.mu.Unlock()
					return err
				}
			}
			if err := d.rotate(session); err != nil {
				d.mu.Unlock()
				return err
			}
		}
	}
	var size int64
	if st := d.state[session]; st != nil {
		size = st.size
	} else if fi, err := os.Stat(d.file(session)); err == nil {
		size = fi.Size()
	}
	d.mu.Unlock()

	c, err := d.loadCarry(session)
	if err != nil {
		return err
	}
	ns, err := d.parts(session)
	if err != nil {
		return err
	}
	type part struct {
		n    int
		size int64
		mod  time.Time
	}
	var ps []part
	for _, n := range ns {
		if n <= c.Through { // folded in before a crash: only the removal is left
			if err := os.Remove(d.partFile(session, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		fi, err := os.Stat(d.partFile(session, n))
		if err != nil {
			continue
		}
		ps = append(ps, part{n, fi.Size(), fi.ModTime()})
		size += fi.Size()
	}
	for _, p := range ps {
		over := ret.MaxSize > 0 && size > ret.MaxSize
		old := ret.MaxAge > 0 && now.Sub(p.mod) > ret.MaxAge
		if !over && !old {
			break
		}
		f, err := os.Open(d.partFile(session, p.n))
		if err != nil {
			return err
		}
		err = eachEntry(f, func(e *Entry) { c.add(e) })
		f.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", d.partFile(session, p.n), err)
		}
		c.Version, c.Through = CarryVersion, p.n
		b, _ := json.Marshal(&c)
		if err := atomicfile.Write(d.carryFile(session), b, 0o600); err != nil {
			return fmt.Errorf("save the decision log's carry: %w", err)
		}
		if err := os.Remove(d.partFile(session, p.n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		size -= p.size
	}
	return nil
}

// ReadLog returns the session's log: the counts its dropped parts carried
// over and every line still kept, oldest first (damaged lines skipped).
// A session with no log has an empty one.
func (d *Dir) ReadLog(session string) (Log, error) {
	fs, c, err := d.openLog(session)
	if err != nil {
		return Log{}, err
	}
	defer closeAll(fs)
	l := Log{Carried: c}
	for _, f := range fs {
		if err := eachEntry(f, func(e *Entry) { l.Entries = append(l.Entries, *e) }); err != nil {
			return Log{}, err
		}
	}
	return l, nil
}

// openLog opens the session's kept parts, oldest first, with its carry,
// as one consistent view: a sweep or rotation after it has returned does
// not change what the files read (a removed file stays readable).
func (d *Dir) openLog(session string) ([]*os.File, Carry, error) {
	if !validSession(session) {
		return nil, Carry{}, fmt.Errorf("session id %q: %w", session, errdefs.ErrInvalid)
	}
	d.sweepMu.Lock()
	defer d.sweepMu.Unlock()
	c, err := d.loadCarry(session)
	if err != nil {
		return nil, Carry{}, err
	}
	d.mu.Lock() // no rotation while the files are opened
	defer d.mu.Unlock()
	ns, err := d.parts(session)
	if err != nil {
		return nil, Carry{}, err
	}
	var fs []*os.File
	for _, n := range ns {
		if n <= c.Through {
			continue
		}
		f, err := os.Open(d.partFile(session, n))
		if err != nil {
			closeAll(fs)
			return nil, Carry{}, err
		}
		fs = append(fs, f)
	}
	f, err := os.Open(d.file(session))
	switch {
	case err == nil:
		fs = append(fs, f)
	case !errors.Is(err, os.ErrNotExist):
		closeAll(fs)
		return nil, Carry{}, err
	}
	return fs, c, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// eachEntry calls f for each line of r that decodes, in order.
func eachEntry(r io.Reader, f func(*Entry)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, maxLine)
		if line != nil {
			var e Entry
			if json.Unmarshal(line, &e) == nil {
				f(&e)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// removeRotated deletes the session's rotated parts and carry. Under
// sweepMu.
func (d *Dir) removeRotated(session string) error {
	ns, err := d.parts(session)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range ns {
		if err := os.Remove(d.partFile(session, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(d.carryFile(session)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopSweeper ends the sweeper and waits for it.
func (d *Dir) stopSweeper() {
	d.mu.Lock()
	done := d.done
	d.done = nil
	d.mu.Unlock()
	if done != nil {
		close(done)
		d.sweeping.Wait()
	}
}

// clock is the time now (a test's own clock where set). Under mu.
func (d *Dir) clock() time.Time {
	if d.now != nil {
		return d.now()
	}
	return time.Now()
}
