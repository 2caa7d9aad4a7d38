package portable

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"sort"
	"time"
)

// entry is one tar entry with its data.
type entry struct {
	name  string
	data  []byte
	mtime time.Time
}

// Write writes a as a session file to w: it fills in the manifest's
// format, version, time (if zero) and entries, checks everything with the
// rules Read applies, within DefaultLimits, and writes only when all hold,
// so an export never makes a file an import refuses. a.Files are written
// sorted by path; a.Decisions lose their session field.
func Write(w io.Writer, a *Archive) error {
	m := a.Manifest
	m.Format, m.Version = Format, Version
	if m.Created.IsZero() {
		m.Created = time.Now().UTC()
	}
	es, notes, err := entries(a, m.Created)
	if err != nil {
		return err
	}
	m.LeftOut = append(append([]string(nil), m.LeftOut...), notes...)
	m.Entries = m.Entries[:0:0]
	for _, e := range es {
		sum := sha256.Sum256(e.data)
		m.Entries = append(m.Entries, ManifestEntry{Path: e.name, Size: int64(len(e.data)), SHA256: hex.EncodeToString(sum[:])})
	}
	if err := checkManifest(&m, DefaultLimits); err != nil {
		return err
	}
	if err := checkSettings(&a.Settings); err != nil {
		return err
	}
	var t tally
	for _, e := range es {
		if err := checkData(e.name, e.data, DefaultLimits, &t); err != nil {
			return err
		}
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	mb, _ = Redact(mb) // its notes and versions are text too
	if len(mb) > maxManifest {
		return bad("the manifest would be %d bytes, more than %d", len(mb), maxManifest)
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, e := range append([]entry{{name: ManifestName, data: mb, mtime: m.Created}}, es...) {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o600, Size: int64(len(e.data)),
			ModTime: e.mtime.Truncate(time.Second), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// entries lays a out as the entries after the manifest, sanitized (no
// credential ever goes into a file), with notes on what that took out.
func entries(a *Archive, at time.Time) ([]entry, []string, error) {
	sb, err := json.MarshalIndent(a.Settings, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	sb, n := Redact(sb)
	var notes []string
	if n > 0 {
		notes = append(notes, SettingsName+": credential-shaped strings replaced")
	}
	es := []entry{{name: SettingsName, data: sb, mtime: at}}
	if len(a.Decisions) > 0 {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, d := range a.Decisions {
			d.Session = "" // the importing Runner gives its own id
			if err := enc.Encode(d); err != nil {
				return nil, nil, err
			}
		}
		db, n := Redact(buf.Bytes())
		if n > 0 {
			notes = append(notes, DecisionsName+": credential-shaped strings replaced")
		}
		es = append(es, entry{name: DecisionsName, data: db, mtime: at})
	}
	files := append([]File(nil), a.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		mt := f.ModTime
		if mt.IsZero() {
			mt = at
		}
		data, ns := sanitize(f.Path, f.Data)
		notes = append(notes, ns...)
		es = append(es, entry{name: ClaudePrefix + f.Path, data: data, mtime: mt})
	}
	return es, notes, nil
}
