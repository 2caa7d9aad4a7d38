package h1

import (
	"net/http"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// startTestServer serves h with a Server on a loopback port.
func startTestServer(tb testing.TB, h http.Handler, readHeaderTimeout time.Duration) *testenv.Served {
	tb.Helper()
	return testenv.ServeLoopback(tb, NewServer(h, readHeaderTimeout))
}
