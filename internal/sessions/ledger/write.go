package ledger

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Formats of a written ledger.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
)

// CheckFormat reports whether f is a format Write knows.
func CheckFormat(f string) error {
	switch f {
	case FormatJSONL, FormatCSV:
		return nil
	}
	return fmt.Errorf("format %q: use %s or %s", f, FormatJSONL, FormatCSV)
}

// Write writes records to w in format: JSON Lines (one Record per line)
// or CSV (a header row, then one row per record; see CSVHeader).
func Write(w io.Writer, format string, records []Record) error {
	if err := CheckFormat(format); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	if format == FormatCSV {
		if err := writeCSV(bw, records); err != nil {
			return err
		}
		return bw.Flush()
	}
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // a command line reads as it was written
	for i := range records {
		if err := enc.Encode(&records[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// CSVHeader names the CSV columns. The tool columns hold one call per
// line of the cell: the ids in *_ids, "Name: command" (or "Name input")
// in the other.
var CSVHeader = []string{"v", "seq", "time", "kind", "session", "request_id", "method", "decision", "reason",
	"status", "duration_ms", "bytes_in", "bytes_out", "path", "model", "input_tokens", "output_tokens",
	"cache_read_tokens", "cache_creation_tokens", "upstream_request_id", "message_id",
	"tool_result_ids", "tool_results", "tool_use_ids", "tool_uses", "host", "port", "addr", "rule",
	"during_tool_use_ids", "during_tool_uses"}

func writeCSV(w io.Writer, records []Record) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range records {
		ids, descs := refCells(r.ToolResults)
		uids, udescs := refCells(r.ToolUses)
		dids, ddescs := refCells(r.DuringToolUses)
		port := ""
		if r.Port != 0 {
			port = strconv.Itoa(r.Port)
		}
		row := []string{strconv.Itoa(r.V), strconv.Itoa(r.Seq), r.Time.UTC().Format(time.RFC3339Nano), r.Kind,
			text(r.Session), text(r.RequestID), text(r.Method), text(string(r.Decision)), text(r.Reason),
			strconv.Itoa(r.Status), strconv.FormatFloat(r.DurationMS, 'f', -1, 64), n(r.BytesIn), n(r.BytesOut),
			text(r.Path), text(r.Model), n(r.InputTokens), n(r.OutputTokens), n(r.CacheReadTokens), n(r.CacheCreationTokens),
			text(r.UpstreamRequestID), text(r.MessageID), ids, descs, uids, udescs,
			text(r.Host), port, text(r.Addr), text(r.Rule), dids, ddescs}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// refCells renders calls as two cells, one call per line.
func refCells(refs []ToolRef) (ids, descs string) {
	var a, b []string
	for _, r := range refs {
		a = append(a, r.ID)
		d := r.Name
		switch {
		case r.Command != "":
			d += ": " + r.Command
		case len(r.Input) > 0:
			d += " " + string(r.Input)
		}
		b = append(b, d)
	}
	if strings.Join(b, "") == "" {
		b = nil // no transcript: no descriptions
	}
	return text(strings.Join(a, "\n")), text(strings.Join(b, "\n"))
}

// text keeps a cell from being taken for a formula by a spreadsheet: a
// value that starts with = + - @ or a tab or carriage return is written
// after a single quote (the usual guard; the box chooses much of what the
// ledger holds).
func text(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
