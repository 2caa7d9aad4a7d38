package decisionlog

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// appendEntry appends e as json.Marshal encodes it, byte for byte (the
// differential fuzz target FuzzAppendEntry holds it to that), without
// reflection: the proxy writes one entry per request. Values json.Marshal
// would render in a rarer form (a string needing escapes, a float in
// exponent form, a time RFC 3339 cannot hold) are handed to json.Marshal
// itself; ok is false where json.Marshal would fail.
func appendEntry(b []byte, e *Entry) (_ []byte, ok bool) {
	_, off := e.Time.Zone()
	if y := e.Time.Year(); y < 0 || y > 9999 || off <= -24*3600 || off >= 24*3600 {
		// Times RFC 3339 cannot hold: json.Marshal fails on them.
		cp := *e // escapes on this path only
		line, err := json.Marshal(&cp)
		return append(b, line...), err == nil
	}
	b = append(b, `{"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = optString(b, "kind", e.Kind)
	b = optString(b, "host", e.Host)
	b = optInt(b, "port", int64(e.Port))
	b = optString(b, "addr", e.Addr)
	b = optString(b, "rule", e.Rule)
	b = appendKeyString(b, "session", e.Session)
	b = appendKeyString(b, "request_id", e.RequestID)
	b = appendKeyString(b, "method", e.Method)
	b = appendKeyString(b, "path", e.Path)
	b = appendKeyString(b, "decision", string(e.Decision))
	b = optString(b, "reason", e.Reason)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"bytes_in":`...)
	b = strconv.AppendInt(b, e.BytesIn, 10)
	b = append(b, `,"bytes_out":`...)
	b = strconv.AppendInt(b, e.BytesOut, 10)
	b = append(b, `,"duration_ms":`...)
	if b, ok = appendFloat(b, e.DurationMS); !ok {
		return b, false
	}
	b = optString(b, "model", e.Model)
	if e.Stream {
		b = append(b, `,"stream":true`...)
	}
	b = optInt(b, "input_tokens", e.InputTokens)
	b = optInt(b, "output_tokens", e.OutputTokens)
	b = optInt(b, "cache_read_tokens", e.CacheReadTokens)
	b = optInt(b, "cache_creation_tokens", e.CacheCreationTokens)
	b = optStrings(b, "tool_result_ids", e.ToolResultIDs)
	b = optString(b, "upstream_request_id", e.UpstreamRequestID)
	b = optString(b, "message_id", e.MessageID)
	b = optStrings(b, "tool_use_ids", e.ToolUseIDs)
	b = optString(b, "credential_user", e.CredentialUser)
	b = optString(b, "service", e.Service)
	b = optString(b, "repo", e.Repo)
	b = optStrings(b, "ref_updates", e.RefUpdates)
	return append(b, '}'), true
}

func appendKeyString(b []byte, key, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

func optString(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendKeyString(b, key, v)
}

func optStrings(b []byte, key string, vs []string) []byte {
	if len(vs) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, `":[`...)
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v)
	}
	return append(b, ']')
}

func optInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

// appendString copies a string of plain printable ASCII between quotes and
// leaves any other to json.Marshal (escapes, HTML-safe forms, UTF-8).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat writes f as json.Marshal does: shortest form, plain
// notation between 1e-6 and 1e21 (the rest to json.Marshal); NaN and
// infinities fail.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		q, _ := json.Marshal(f)
		return append(b, q...), true
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64), true
}
