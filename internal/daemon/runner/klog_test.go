package runner

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// TestQuietKlog: client-go's errors reach the Runner's log at debug level,
// and nothing at info.
func TestQuietKlog(t *testing.T) {
	defer klog.ClearLogger()
	var debug, info testenv.Buffer
	quietKlog(slog.New(slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug})))
	klog.ErrorS(errors.New("use of closed network connection"), "Unhandled Error")
	if got := debug.String(); !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "component=client-go") || !strings.Contains(got, "closed network connection") {
		t.Fatalf("at debug: %q", got)
	}
	quietKlog(slog.New(slog.NewTextHandler(&info, nil)))
	klog.ErrorS(errors.New("use of closed network connection"), "Unhandled Error")
	if got := info.String(); got != "" {
		t.Fatalf("at info: %q", got)
	}
}
