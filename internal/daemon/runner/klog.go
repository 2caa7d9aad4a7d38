package runner

import (
	"context"
	"log/slog"

	"k8s.io/klog/v2"
)

// quietKlog sends what client-go logs through klog (the kubernetes
// backend's library) to the Runner's log at debug level, tagged
// component=client-go, instead of raw lines on standard error. client-go
// logs as errors what is routine for paddock (an exec stream read after
// its Close: "use of closed network connection"); a real failure reaches
// the Runner as a returned error and is logged there with its context.
// klog's logger is process-wide, and the Runner owns the process.
func quietKlog(log *slog.Logger) {
	klog.SetSlogLogger(slog.New(debugHandler{log.Handler()}).With("component", "client-go"))
}

// debugHandler logs every record at debug level.
type debugHandler struct{ slog.Handler }

func (h debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, slog.LevelDebug)
}

// Handle drops the record unless debug is on: klog's bridge hands errors
// over without asking Enabled first.
func (h debugHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.Handler.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	r.Level = slog.LevelDebug
	return h.Handler.Handle(ctx, r)
}

func (h debugHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return debugHandler{h.Handler.WithAttrs(as)}
}

func (h debugHandler) WithGroup(name string) slog.Handler {
	return debugHandler{h.Handler.WithGroup(name)}
}
