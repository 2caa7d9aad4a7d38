// Package logkey names the structured log fields paddock emits, so that the
// same thing is always called the same way in every log line.
package logkey

// Field names. Keep them lower_snake and stable: people grep for them.
const (
	Session     = "session"
	Method      = "method"
	Path        = "path"
	Route       = "route"
	Status      = "status"
	Decision    = "decision"
	Reason      = "reason"
	BytesIn     = "bytes_in"
	BytesOut    = "bytes_out"
	Duration    = "duration_ms"
	Model       = "model"
	InputTok    = "input_tokens"
	OutputTok   = "output_tokens"
	CacheRead   = "cache_read_tokens"
	CacheWrite  = "cache_creation_tokens"
	Upstream    = "upstream"
	Error       = "err"
	Kind        = "kind"
	Source      = "source"
	StateDir    = "state_dir"
	Listen      = "listen"
	Socket      = "socket"
	Version     = "version"
	RequestID   = "request_id"
	Stream      = "stream"
	Component   = "component"
	ConfigFile  = "config"
	TokenHash   = "token"
	PID         = "pid"
	UpstreamReq = "upstream_request_id"
)
