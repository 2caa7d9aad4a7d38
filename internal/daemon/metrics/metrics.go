// Package metrics exposes the Runner's Prometheus metrics: sessions by
// state and by activity, credential proxy requests by route and status, tokens, egress
// decisions, request durations. It watches decisions as a decisionlog.Sink
// placed beside the per-session log, so the proxies carry no metrics code.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/paddockhq/paddock/internal/credentials/oauth"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Sessions lists sessions for the gauge.
type Sessions func(ctx context.Context) ([]session.Session, error)

// Metrics is one Runner's registry.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	egress   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// byUser and userTokens say whose credential paid: the host user who
	// stored it (bounded by the host's users), never the credential.
	byUser     *prometheus.CounterVec
	userTokens *prometheus.CounterVec

	// Children resolved once: every proxied request is recorded here, and
	// resolving a child by its label values (hashing them, a map lookup
	// under a lock) is most of a record's cost. Each cache is bounded as
	// its labels are.
	tokIn, tokOut, tokCacheRead, tokCacheCreation prometheus.Counter
	durations                                     [len(routes) + 1][2]prometheus.Observer
	reqChild                                      sync.Map // requestKey → prometheus.Counter
	userChild                                     sync.Map // userKey → prometheus.Counter
	userTokChild                                  sync.Map // user → prometheus.Counter
}

type requestKey struct {
	route    int
	decision decisionlog.Decision
	status   int
}

type userKey struct {
	user     string
	decision decisionlog.Decision
}

// New registers the metrics; sessions feeds the per-state gauge at scrape time.
func New(sessions Sessions) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paddock_proxy_requests_total",
		Help: "Credential proxy requests by route, decision and status."}, []string{"route", "decision", "status"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paddock_tokens_total",
		Help: "Tokens reported by the API through the credential proxy, by kind."}, []string{"kind"})
	m.egress = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paddock_egress_decisions_total",
		Help: "Egress proxy connections by decision."}, []string{"decision"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "paddock_proxy_request_duration_seconds",
		Help:    "Credential proxy request durations (for streams: until the last byte).",
		Buckets: []float64{.005, .01, .05, .1, .5, 1, 5, 15, 30, 60, 120, 300, 600}}, []string{"route", "stream"})
	m.byUser = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paddock_credential_requests_total",
		Help: "Credential proxy requests by whose credential they went out with (a host user) and decision."}, []string{"user", "decision"})
	m.userTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paddock_credential_tokens_total",
		Help: "Input plus output tokens by whose credential paid for them (a host user)."}, []string{"user"})
	m.tokIn, m.tokOut = m.tokens.WithLabelValues("input"), m.tokens.WithLabelValues("output")
	m.tokCacheRead, m.tokCacheCreation = m.tokens.WithLabelValues("cache_read"), m.tokens.WithLabelValues("cache_creation")
	for i := range m.durations {
		m.durations[i][0] = m.duration.WithLabelValues(routeName(i), "false")
		m.durations[i][1] = m.duration.WithLabelValues(routeName(i), "true")
	}
	m.reg.MustRegister(m.requests, m.tokens, m.egress, m.duration, m.byUser, m.userTokens,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&sessionCollector{list: sessions, desc: prometheus.NewDesc("paddock_sessions",
			"Sessions by observed state.", []string{"state"}, nil),
			activity: prometheus.NewDesc("paddock_sessions_activity",
				"Running sessions by what their Claude Code does (unknown: no report yet).", []string{"activity"}, nil)})
	return m
}

// Handler serves the exposition.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// LoginStatus exports paddock's own login (paddock credential login) from
// status at scrape time: paddock_login_expires_timestamp_seconds,
// paddock_login_refreshes_total, paddock_login_failing (1 while refreshes
// fail), paddock_login_dead (1 when only a new login helps). Never a token.
func (m *Metrics) LoginStatus(status func() oauth.Status) {
	gauge := func(name, help string, f func(oauth.Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(status()) })
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	m.reg.MustRegister(
		gauge("paddock_login_expires_timestamp_seconds", "When the access token of paddock's own login expires (0: no login).", func(s oauth.Status) float64 {
			if !s.LoggedIn || s.Expires.IsZero() {
				return 0
			}
			return float64(s.Expires.Unix())
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "paddock_login_refreshes_total", Help: "Successful refreshes of paddock's own login since the Runner started."},
			func() float64 { return float64(status().Refreshes) }),
		gauge("paddock_login_failing", "1 while refreshing paddock's own login fails (it is retried).", func(s oauth.Status) float64 { return b(s.Failing) }),
		gauge("paddock_login_dead", "1 when the OAuth server refused paddock's login: run paddock credential login.", func(s oauth.Status) float64 { return b(s.Dead) }),
	)
}

// Record implements decisionlog.Sink.
func (m *Metrics) Record(e decisionlog.Entry) {
	if e.Kind == "egress" {
		m.egress.WithLabelValues(string(e.Decision)).Inc()
		return
	}
	route := routeOf(e.Path)
	child(&m.reqChild, requestKey{route, e.Decision, e.Status}, func() prometheus.Counter {
		return m.requests.WithLabelValues(routeName(route), string(e.Decision), strconv.Itoa(e.Status))
	}).Inc()
	if e.CredentialUser != "" {
		child(&m.userChild, userKey{e.CredentialUser, e.Decision}, func() prometheus.Counter {
			return m.byUser.WithLabelValues(e.CredentialUser, string(e.Decision))
		}).Inc()
		if n := e.InputTokens + e.OutputTokens; n > 0 {
			child(&m.userTokChild, e.CredentialUser, func() prometheus.Counter {
				return m.userTokens.WithLabelValues(e.CredentialUser)
			}).Add(float64(n))
		}
	}
	if e.Decision == decisionlog.Forwarded {
		stream := 0
		if e.Stream {
			stream = 1
		}
		m.durations[route][stream].Observe(e.DurationMS / 1000)
		m.tokIn.Add(float64(e.InputTokens))
		m.tokOut.Add(float64(e.OutputTokens))
		m.tokCacheRead.Add(float64(e.CacheReadTokens))
		m.tokCacheCreation.Add(float64(e.CacheCreationTokens))
	}
}

// child is the cached child under k, resolved by make the first time.
func child[K comparable](cache *sync.Map, k K, make func() prometheus.Counter) prometheus.Counter {
	if c, ok := cache.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := cache.LoadOrStore(k, make())
	return c.(prometheus.Counter)
}

// routes are the route label's values; any other path is "other". They
// keep the label's cardinality bounded.
var routes = [...]string{"/v1/messages", "/v1/messages/count_tokens", "/v1/models", "/api/hello"}

// routeOf is the index of path's route in routes, or len(routes) for
// "other".
func routeOf(path string) int {
	p, _, _ := strings.Cut(path, "?")
	for i, r := range routes {
		if p == r {
			return i
		}
	}
	return len(routes)
}

func routeName(i int) string {
	if i < len(routes) {
		return routes[i]
	}
	return "other"
}

type sessionCollector struct {
	list     Sessions
	desc     *prometheus.Desc
	activity *prometheus.Desc
}

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.activity }

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	ss, err := c.list(context.Background())
	if err != nil {
		return
	}
	counts := map[session.State]int{session.Created: 0, session.Running: 0, session.Asleep: 0, session.Failed: 0, session.Removed: 0}
	acts := map[activity.State]int{activity.Starting: 0, activity.Working: 0, activity.Waiting: 0, activity.Exited: 0}
	for _, s := range ss {
		counts[s.Observed]++
		if s.Observed == session.Running {
			acts[s.Activity.State]++ // "" is a session with no report yet
		}
	}
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(st))
	}
	for a, n := range acts {
		label := string(a)
		if label == "" {
			label = "unknown"
		}
		ch <- prometheus.MustNewConstMetric(c.activity, prometheus.GaugeValue, float64(n), label)
	}
}

// Tee is a decisionlog.Sink that records into several sinks.
type Tee []decisionlog.Sink

// Record implements decisionlog.Sink.
func (t Tee) Record(e decisionlog.Entry) {
	for _, s := range t {
		s.Record(e)
	}
}
