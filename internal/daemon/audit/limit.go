package audit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// quota is one person's refusal rate, a token bucket, and the refusals
// over it not recorded yet.
type quota struct {
	tokens float64
	last   time.Time // when tokens was last brought up to date

	// n refusals not recorded since this person's last entry, the first at
	// since; by action (at most quotaActions of them, the rest as "other").
	n       int
	since   time.Time
	user    string
	actions map[string]int
	// The session of those refusals, if they were all on one.
	session, sessionName, owner string
	mixed                       bool
	// timer writes the count once the rate allows one more record.
	timer *time.Timer
}

const (
	// quotaActions is the most actions a count names one by one.
	quotaActions = 8
	// maxQuotas is the most people whose rate is kept before those with a
	// full bucket and nothing counted are forgotten.
	maxQuotas = 4096
)

// admit decides whether e is written, and returns its person's quota if
// they have one. A refusal over the rate is counted in the quota and not
// written (false). Accepted actions are always written. l.mu is held.
func (l *Log) admit(e Entry) (*quota, bool) {
	q := l.quota[e.UID]
	limited := e.Error != "" && l.opts.RefusalRate > 0
	if !limited {
		return q, true
	}
	now := l.now()
	if q == nil {
		if len(l.quota) >= maxQuotas {
			l.forgetIdle(now)
		}
		if l.quota == nil {
			l.quota = map[uint32]*quota{}
		}
		q = &quota{tokens: float64(l.opts.RefusalBurst), last: now}
		l.quota[e.UID] = q
	}
	l.refill(q, now)
	if q.tokens >= 1 {
		q.tokens--
		return q, true
	}
	q.count(e, now)
	if q.timer == nil {
		wait := time.Duration((1 - q.tokens) / l.opts.RefusalRate * float64(time.Second))
		uid := e.UID
		q.timer = time.AfterFunc(max(wait, time.Millisecond), func() { l.flush(uid) })
	}
	return q, false
}

// refill brings q's tokens up to now.
func (l *Log) refill(q *quota, now time.Time) {
	if d := now.Sub(q.last); d > 0 {
		q.tokens = min(q.tokens+d.Seconds()*l.opts.RefusalRate, float64(l.opts.RefusalBurst))
		q.last = now
	}
}

// forgetIdle drops the quotas with a full bucket and nothing counted.
func (l *Log) forgetIdle(now time.Time) {
	for uid, q := range l.quota {
		l.refill(q, now)
		if q.n == 0 && q.tokens >= float64(l.opts.RefusalBurst) {
			delete(l.quota, uid)
		}
	}
}

// count adds e, a refusal not recorded, to q.
func (q *quota) count(e Entry, now time.Time) {
	if q.n == 0 {
		q.since, q.mixed = now, false
		q.session, q.sessionName, q.owner = clip(e.Session, refusalField), clip(e.SessionName, refusalField), clip(e.Owner, refusalField)
	} else if !q.mixed && (q.session != clip(e.Session, refusalField) || q.sessionName != clip(e.SessionName, refusalField)) {
		q.mixed = true
		q.session, q.sessionName, q.owner = "", "", ""
	}
	q.n++
	q.user = clip(e.User, refusalField)
	if q.actions == nil {
		q.actions = map[string]int{}
	}
	a := clip(e.Action, 32)
	if _, ok := q.actions[a]; !ok && len(q.actions) >= quotaActions {
		a = "other"
	}
	q.actions[a]++
}

// take returns the ActionSuppressed entry of what q counted, and empties q.
func (q *quota) take(uid uint32, now time.Time) Entry {
	type ac struct {
		a string
		n int
	}
	var acs []ac
	for a, n := range q.actions {
		acs = append(acs, ac{a, n})
	}
	slices.SortFunc(acs, func(x, y ac) int { return cmp.Or(cmp.Compare(y.n, x.n), strings.Compare(x.a, y.a)) })
	parts := make([]string, 0, len(acs))
	for _, x := range acs {
		parts = append(parts, fmt.Sprintf("%s %d", x.a, x.n))
	}
	what := "refusals"
	if q.n == 1 {
		what = "refusal"
	}
	e := Entry{Time: now.UTC(), User: q.user, UID: uid, Action: ActionSuppressed, Suppressed: q.n,
		Session: q.session, SessionName: q.sessionName, Owner: q.owner,
		Detail: fmt.Sprintf("%d %s not recorded, over the rate, since %s: %s", q.n, what, q.since.UTC().Format(time.RFC3339), strings.Join(parts, ", "))}
	q.n, q.actions, q.mixed = 0, nil, false
	q.session, q.sessionName, q.owner = "", "", ""
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	return e
}

// untake puts back the count c that take made and that was not written.
func (q *quota) untake(c Entry) {
	q.n += c.Suppressed
	if q.actions == nil {
		q.actions = map[string]int{}
	}
	q.actions["other"] += c.Suppressed
	q.mixed = true
}

// flush is q's timer: the rate allows one more record, so the count is
// written if no entry of the person carried it meanwhile.
func (l *Log) flush(uid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.quota[uid]
	if l.closed || q == nil {
		return
	}
	q.timer = nil
	if q.n == 0 {
		return
	}
	now := l.now()
	l.refill(q, now)
	q.tokens = max(q.tokens-1, 0)
	c := q.take(uid, now)
	if line, err := encode(c); err == nil {
		if n, _ := l.write(line); n > 0 {
			return
		}
	}
	// Not written (a full disk): counted again, and tried again later.
	q.untake(c)
	q.timer = time.AfterFunc(time.Duration(float64(time.Second)/l.opts.RefusalRate), func() { l.flush(uid) })
}

// flushAll writes every count not yet written, at Close. l.mu is held.
func (l *Log) flushAll() error {
	now := l.now()
	uids := make([]uint32, 0, len(l.quota))
	for uid, q := range l.quota {
		if q.timer != nil {
			q.timer.Stop()
			q.timer = nil
		}
		if q.n > 0 {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	var lines []byte
	for _, uid := range uids {
		line, err := encode(l.quota[uid].take(uid, now))
		if err != nil {
			return err
		}
		lines = append(lines, line...)
	}
	if len(lines) == 0 {
		return nil
	}
	_, err := l.write(lines)
	return err
}
