package portable

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Read parses and checks a session file, holding at most lim of it in
// memory (zero fields take DefaultLimits'). Every rule of the package doc
// is checked before Read returns, each entry's as it streams in: a file
// that breaks one is refused at the first byte that does, not after it
// was read whole. On any error nothing of the file is returned. What it
// takes out of the files that travel (sanitize: keys that hold a
// credential, credential-shaped strings) is said in Notes.
func Read(r io.Reader, lim Limits) (*Archive, []string, error) {
	lim = lim.withDefaults()
	a, notes, err := read(r, lim, true)
	if err != nil {
		return nil, nil, refuse(err)
	}
	return a, notes, nil
}

// Check checks a session file as Read does, every rule, without holding
// its entries: only the manifest, the settings and each JSON document
// while it is checked (at most Limits.MaxEntry), and one line of a JSON
// lines entry (at most Limits.MaxLine). The Archive it returns has the
// manifest and the settings, no files and no decisions.
func Check(r io.Reader, lim Limits) (*Archive, error) {
	lim = lim.withDefaults()
	a, _, err := read(r, lim, false)
	if err != nil {
		return nil, refuse(err)
	}
	return a, nil
}

func (l Limits) withDefaults() Limits {
	if l.MaxEntry <= 0 {
		l.MaxEntry = DefaultLimits.MaxEntry
	}
	if l.MaxTotal <= 0 {
		l.MaxTotal = DefaultLimits.MaxTotal
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultLimits.MaxEntries
	}
	if l.MaxCompressed <= 0 {
		l.MaxCompressed = DefaultLimits.MaxCompressed
	}
	if l.MaxLine <= 0 {
		l.MaxLine = DefaultLimits.MaxLine
	}
	if l.MaxLines <= 0 {
		l.MaxLines = DefaultLimits.MaxLines
	}
	if l.MaxDecisions <= 0 {
		l.MaxDecisions = DefaultLimits.MaxDecisions
	}
	return l
}

// errCompressed is the error of a stream longer than Limits.MaxCompressed.
var errCompressed = errors.New("more compressed bytes than a session file may have")

// capReader fails once more than n bytes were read.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errCompressed
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	k, err := c.r.Read(p)
	c.n -= int64(k)
	return k, err
}

// maxTrailer bounds the zeros a tar writer may pad its end with (GNU tar
// pads to 10 KiB records).
const maxTrailer = 1 << 20

// read is Read, and with keep false Check: the entries' data is then
// checked and let go.
func read(r io.Reader, lim Limits, keep bool) (*Archive, []string, error) {
	cr := &capReader{r: r, n: lim.MaxCompressed}
	br := bufio.NewReader(cr)
	// Said plainly before gzip's reader says "cut short" of a short file
	// that is no gzip at all.
	switch magic, _ := br.Peek(2); {
	case len(magic) == 0:
		return nil, nil, bad("it is empty")
	case magic[0] != 0x1f || len(magic) > 1 && magic[1] != 0x8b:
		return nil, nil, bad("not gzip-compressed data where a gzip stream should be")
	}
	gz, err := gzip.NewReader(br)
	if err != nil {
		return nil, nil, compressedErr(err)
	}
	tr := tar.NewReader(gz)

	// The manifest first: it says what follows, and nothing else may.
	h, err := next(tr)
	if err != nil {
		return nil, nil, err
	}
	if h.Name != ManifestName {
		return nil, nil, bad("its first entry is %q, not %s", clip(h.Name), ManifestName)
	}
	if h.Size > maxManifest {
		return nil, nil, bad("%s has %d bytes, more than %d", ManifestName, h.Size, maxManifest)
	}
	mb, err := readData(tr, h)
	if err != nil {
		return nil, nil, err
	}
	var m Manifest
	if err := strict(mb, &m); err != nil {
		// The version first: a newer file is not "damaged".
		var v struct {
			Format  string `json:"format"`
			Version int    `json:"version"`
		}
		if json.Unmarshal(mb, &v) == nil && v.Format == Format && v.Version != Version {
			return nil, nil, versionErr(v.Version)
		}
		return nil, nil, bad("%s: %v", ManifestName, err)
	}
	if err := checkManifest(&m, lim); err != nil {
		return nil, nil, err
	}

	a := &Archive{Manifest: m}
	var notes []string
	var t tally
	buf := make([]byte, chunk)
	for _, me := range m.Entries {
		h, err := next(tr)
		if errors.Is(err, io.EOF) {
			return nil, nil, bad("the file ends before %s, which its manifest lists: it was cut short", clip(me.Path))
		}
		if err != nil {
			return nil, nil, err
		}
		if h.Name != me.Path {
			return nil, nil, bad("entry %q where the manifest lists %q: an entry twice, one the manifest does not list, or out of its order", clip(h.Name), clip(me.Path))
		}
		if h.Size != me.Size {
			return nil, nil, bad("%s has %d bytes; its manifest says %d", clip(me.Path), h.Size, me.Size)
		}
		// Checked as it streams in; kept only if it is to be used.
		c := newEntryCheck(me.Path, h.Size, lim, &t, keep && me.Path != DecisionsName)
		c.hash, c.decode = sha256.New(), keep
		if err := copyEntry(c, tr, h.Size, buf); err != nil {
			var re ruleError
			switch {
			case errors.As(err, &re):
				return nil, nil, err
			case errors.Is(err, errCut):
				return nil, nil, bad("%s is cut short", clip(h.Name))
			}
			return nil, nil, compressedErr(err)
		}
		if hex.EncodeToString(c.hash.Sum(nil)) != me.SHA256 {
			return nil, nil, bad("%s does not match its SHA-256 in the manifest: the file was altered or damaged", clip(me.Path))
		}
		if err := c.Close(); err != nil {
			return nil, nil, err
		}
		switch p := me.Path; {
		case p == SettingsName:
			if err := strict(c.data, &a.Settings); err != nil {
				return nil, nil, bad("%s: %v", SettingsName, err)
			}
		case p == DecisionsName:
			a.Decisions = c.decisions
		case keep:
			rel := strings.TrimPrefix(p, ClaudePrefix)
			data, ns := sanitize(rel, c.data)
			notes = append(notes, ns...)
			a.Files = append(a.Files, File{Path: rel, Data: data, ModTime: h.ModTime.UTC()})
		}
	}
	if h, err := next(tr); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, bad("entry %q after the last one the manifest lists", clip(h.Name))
	}
	// The rest of the stream: tar's padding (zeros), then the gzip
	// trailer, whose checksum a cut or damaged stream fails.
	n, err := io.Copy(zeros{}, io.LimitReader(gz, maxTrailer+1))
	switch {
	case errors.Is(err, errNotZero):
		return nil, nil, bad("data after the end of its tar stream")
	case err != nil:
		return nil, nil, compressedErr(err)
	case n > maxTrailer:
		return nil, nil, bad("more than %d bytes after the end of its tar stream", maxTrailer)
	}
	if err := checkSettings(&a.Settings); err != nil {
		return nil, nil, err
	}
	return a, notes, nil
}

// next returns the next tar header, refusing every entry type but a
// regular file.
func next(tr *tar.Reader) (*tar.Header, error) {
	h, err := tr.Next()
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		return nil, compressedErr(err)
	}
	if h.Typeflag != tar.TypeReg {
		return nil, bad("entry %q is %s: a session file holds regular files only", clip(h.Name), typeName(h.Typeflag))
	}
	if h.Size < 0 {
		return nil, bad("entry %q has a negative size", clip(h.Name))
	}
	return h, nil
}

// readData reads h's data, exactly h.Size bytes; the buffer grows with
// what arrives, not with what the header claims.
func readData(tr *tar.Reader, h *tar.Header) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, tr, h.Size); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, bad("%s is cut short", clip(h.Name))
		}
		return nil, compressedErr(err)
	}
	return buf.Bytes(), nil
}

// compressedErr words an error of the gzip or tar layer.
func compressedErr(err error) error {
	switch {
	case errors.Is(err, errCompressed):
		return bad("%v", err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return bad("it is cut short (the compressed stream ends early)")
	case errors.Is(err, gzip.ErrChecksum):
		return bad("its compressed stream is damaged (checksum)")
	case errors.Is(err, gzip.ErrHeader):
		return bad("not gzip-compressed data where a gzip stream should be")
	}
	return bad("damaged: %v", err)
}

func versionErr(v int) error {
	if v > Version {
		return bad("it is of format version %d, newer than this paddock reads (%d): upgrade paddock on this machine", v, Version)
	}
	return bad("it is of format version %d; this paddock reads version %d only", v, Version)
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "a symlink"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "a device"
	case tar.TypeFifo:
		return "a FIFO"
	case tar.TypeDir:
		return "a directory"
	}
	return fmt.Sprintf("of type %q", t)
}

// errNotZero is what zeros says of a byte that is not 0.
var errNotZero = errors.New("not zero")

// zeros accepts zero bytes only.
type zeros struct{}

func (zeros) Write(p []byte) (int, error) {
	for _, b := range p {
		if b != 0 {
			return 0, errNotZero
		}
	}
	return len(p), nil
}

// strict decodes one JSON value into v, refusing fields v does not have
// and anything after the value.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after its JSON value")
	}
	return nil
}

// checkManifest checks what the manifest promises before anything of it
// is read: format and version, a conversation id, and entries within lim,
// each path once, each a name the format carries, each with a hash.
func checkManifest(m *Manifest, lim Limits) error {
	if m.Format != Format {
		return bad("its manifest names format %q, not %q", clip(m.Format), Format)
	}
	if m.Version != Version {
		return versionErr(m.Version)
	}
	if m.Conversation != "" {
		if err := CheckConversationID(m.Conversation); err != nil {
			return err
		}
	}
	if len(m.Entries) > lim.MaxEntries {
		return bad("its manifest lists %d entries, more than %d", len(m.Entries), lim.MaxEntries)
	}
	if len(m.LeftOut) > 10000 {
		return bad("its manifest has %d notes, more than 10000", len(m.LeftOut))
	}
	seen := make(map[string]bool, len(m.Entries))
	var total int64
	var files []string
	for i, e := range m.Entries {
		switch {
		case e.Size < 0 || e.Size > lim.MaxEntry:
			return bad("%s: %d bytes; an entry may have at most %d", clip(e.Path), e.Size, lim.MaxEntry)
		case seen[e.Path]:
			return bad("%s: listed twice", clip(e.Path))
		case len(e.SHA256) != 64 || strings.Trim(e.SHA256, "0123456789abcdef") != "":
			return bad("%s: its SHA-256 %q is not 64 lowercase hex digits", clip(e.Path), clip(e.SHA256))
		}
		seen[e.Path] = true
		if total += e.Size; total > lim.MaxTotal {
			return bad("its entries hold more than %d bytes in all", lim.MaxTotal)
		}
		switch {
		case e.Path == SettingsName:
			if i != 0 {
				return bad("%s is not the first entry after the manifest", SettingsName)
			}
		case e.Path == DecisionsName:
		case strings.HasPrefix(e.Path, ClaudePrefix):
			rel := strings.TrimPrefix(e.Path, ClaudePrefix)
			if err := CheckClaudePath(rel); err != nil {
				return err
			}
			files = append(files, rel)
		default:
			return bad("entry %q is not one a session file has (%s, %s, %s, %s…)", clip(e.Path), ManifestName, SettingsName, DecisionsName, ClaudePrefix)
		}
	}
	if !seen[SettingsName] {
		return bad("its manifest lists no %s", SettingsName)
	}
	// No file may stand where another needs a directory.
	isFile := make(map[string]bool, len(files))
	for _, f := range files {
		isFile[f] = true
	}
	for _, f := range files {
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			if isFile[d] {
				return bad("%s: %s is a file, not a directory", clip(f), clip(d))
			}
		}
	}
	return nil
}

// Bounds on the settings' lists and texts.
const (
	maxRules = 1000
	maxText  = 4 << 10
)

// checkSettings checks the settings as the format allows them; the
// importing Runner checks them again as it would a create request (egress
// rules, policies of its config, credential mode on its backend).
func checkSettings(s *Settings) error {
	if s.Name != "" {
		if err := session.ValidName(s.Name); err != nil {
			return bad("%s: %v", SettingsName, err)
		}
	}
	if err := session.ValidModel(s.Model); err != nil {
		return bad("%s: %v", SettingsName, err)
	}
	if s.Effort != "" {
		if err := session.ValidEffort(s.Effort); err != nil {
			return bad("%s: %v", SettingsName, err)
		}
	}
	switch s.CredentialMode {
	case "", session.ModeProxy, session.ModeDirect:
	default:
		return bad("%s: credential mode %q is not proxy or direct", SettingsName, clip(string(s.CredentialMode)))
	}
	switch s.Egress {
	case "", session.EgressOffline, session.EgressAnthropic, session.EgressAllowlist:
	default:
		return bad("%s: egress %q is not offline, anthropic or allowlist", SettingsName, clip(s.Egress))
	}
	for what, list := range map[string][]string{"egress_allow": s.EgressAllow, "egress_deny": s.EgressDeny, "egress_policies": s.EgressPolicies} {
		if len(list) > maxRules {
			return bad("%s: %s has %d items, more than %d", SettingsName, what, len(list), maxRules)
		}
		for _, v := range list {
			if err := checkText(v, 256); err != nil {
				return bad("%s: %s: %v", SettingsName, what, err)
			}
		}
	}
	if len(s.EgressApproved) > maxRules {
		return bad("%s: egress_approved has %d items, more than %d", SettingsName, len(s.EgressApproved), maxRules)
	}
	for _, a := range s.EgressApproved {
		if err := errors.Join(checkText(a.Rule, 256), checkText(a.By, 256)); err != nil {
			return bad("%s: egress_approved: %v", SettingsName, err)
		}
	}
	if _, err := activity.ParsePolicy(string(s.Restart)); err != nil {
		return bad("%s: %v", SettingsName, err)
	}
	if len(s.Restarts.Recent) > activity.MaxRestarts*2 || checkText(s.Restarts.LastReason, maxText) != nil || s.Restarts.Count < 0 {
		return bad("%s: restarts out of bounds", SettingsName)
	}
	if st := s.Activity.State; st != "" && !activity.ValidState(st) {
		return bad("%s: activity %q is not starting, working, waiting or exited", SettingsName, clip(string(st)))
	}
	if checkText(s.Activity.Reason, maxText) != nil || checkText(s.Activity.Signal, 64) != nil {
		return bad("%s: activity out of bounds", SettingsName)
	}
	l := s.Limits
	if l.RPM < 0 || l.Concurrent < 0 || l.TokenBudget < 0 || l.BudgetUSD < 0 || l.BudgetUSD != l.BudgetUSD {
		return bad("%s: limits must be 0 (none) or more", SettingsName)
	}
	if c := s.Carried; c != nil {
		if c.Version != decisionlog.CarryVersion {
			return bad("%s: decisions_carried is of version %d, not %d", SettingsName, c.Version, decisionlog.CarryVersion)
		}
		if len(c.Days) > 100000 || len(c.Models) > 1000 || c.Lines < 0 || c.Totals.Tokens() < 0 {
			return bad("%s: decisions_carried out of bounds", SettingsName)
		}
	}
	return nil
}

// checkText checks a short text: UTF-8, at most max bytes.
func checkText(s string, max int) error {
	if len(s) > max || !utf8.ValidString(s) {
		return fmt.Errorf("%q: not UTF-8 or longer than %d bytes", clip(s), max)
	}
	return nil
}
