package anthropic

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
)

// Summarize reads a Messages API request body; a body it cannot read gives
// an empty summary (the upstream is the judge of validity, not paddock).
//
// It gives what json.Unmarshal into
//
//	struct {
//		Model    string `json:"model"`
//		Stream   bool   `json:"stream"`
//		Messages []struct {
//			Role    string          `json:"role"`
//			Content json.RawMessage `json:"content"`
//		} `json:"messages"`
//	}
//
// would, followed by decoding the content of the last user message (the
// differential fuzz target holds it to that; one difference: in a body that
// repeats "messages", only the last array counts, where json.Unmarshal
// reuses the first's elements), without building the
// messages: it validates the whole body in one pass, as json.Unmarshal
// does first, and decodes only the few values it keeps. Claude Code's
// bodies grow to hundreds of kilobytes; json.Unmarshal spent about 0.3 ms
// on 43 KB, most of the proxy's CPU per request.
func Summarize(body []byte) RequestSummary {
	s := summarizer{b: body}
	if !s.document() || s.typeErr {
		return RequestSummary{}
	}
	return RequestSummary{Model: s.model, Stream: s.stream, ToolResultIDs: toolResultIDs(s.lastUser)}
}

// toolResultIDs returns the tool_use_ids of the tool_result blocks in a
// message's content. Only an array of blocks can hold one: a string
// content, or null, gives json.Unmarshal nothing to add, so it is not
// decoded.
func toolResultIDs(content []byte) []string {
	if len(content) == 0 || content[0] != '[' {
		return nil
	}
	var blocks []struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return nil
	}
	var ids []string
	for _, b := range blocks {
		if b.Type == "tool_result" && b.ToolUseID != "" {
			ids = append(ids, b.ToolUseID)
		}
	}
	return ids
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// summarizer is a validating single-pass JSON scanner that keeps the
// summary's values. typeErr records a value of the wrong JSON type for its
// field, which makes json.Unmarshal fail (after it has read everything).
type summarizer struct {
	b       []byte
	i       int
	depth   int
	typeErr bool

	model    string
	stream   bool
	lastUser []byte // content of the last message whose role is "user"
}

func (s *summarizer) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// document: one value and nothing after it but white space.
func (s *summarizer) document() bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '{' {
		if !s.top() {
			return false
		}
	} else if !s.nullOnly() {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

// top reads the request object.
func (s *summarizer) top() bool {
	return s.object(func(key []byte) bool {
		start := s.i
		switch {
		case fieldIs(key, "model"):
			if !s.value() {
				return false
			}
			s.stringField(s.b[start:s.i], &s.model)
		case fieldIs(key, "stream"):
			if !s.value() {
				return false
			}
			switch string(s.b[start:s.i]) {
			case "true":
				s.stream = true
			case "false":
				s.stream = false
			case "null":
			default:
				s.typeErr = true
			}
		case fieldIs(key, "messages"):
			return s.messages()
		default:
			return s.value()
		}
		return true
	})
}

// messages reads the messages array; as json.Unmarshal replaces a slice,
// a later "messages" key starts over.
func (s *summarizer) messages() bool {
	s.lastUser = nil
	if s.i < len(s.b) && s.b[s.i] == '[' {
		return s.array(func() bool {
			if s.i < len(s.b) && s.b[s.i] == '{' {
				var role string
				var content []byte
				ok := s.object(func(key []byte) bool {
					start := s.i
					if !s.value() {
						return false
					}
					switch {
					case fieldIs(key, "role"):
						s.stringField(s.b[start:s.i], &role)
					case fieldIs(key, "content"):
						content = s.b[start:s.i]
					}
					return true
				})
				if ok && role == "user" {
					s.lastUser = content
					if s.lastUser == nil {
						s.lastUser = []byte("null")
					}
				}
				return ok
			}
			return s.nullOnly()
		})
	}
	return s.nullOnly()
}

// nullOnly reads a value where only an object, an array or null fits the
// field (the caller has taken the first two): anything else is a type
// error.
func (s *summarizer) nullOnly() bool {
	start := s.i
	if !s.value() {
		return false
	}
	if string(s.b[start:s.i]) != "null" {
		s.typeErr = true
	}
	return true
}

// stringField stores a JSON string value in dst; null leaves dst as it
// is; any other type is a type error.
func (s *summarizer) stringField(v []byte, dst *string) {
	switch {
	case len(v) > 0 && v[0] == '"':
		if bytes.IndexByte(v, '\\') < 0 && validUTF8Plain(v[1:len(v)-1]) {
			*dst = string(v[1 : len(v)-1])
			return
		}
		var x string
		if json.Unmarshal(v, &x) != nil {
			s.typeErr = true
			return
		}
		*dst = x
	case string(v) == "null":
	default:
		s.typeErr = true
	}
}

// validUTF8Plain reports whether b is ASCII (then its bytes are the
// string's; otherwise json.Unmarshal does the replacing of bad UTF-8).
func validUTF8Plain(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// fieldIs matches a key as encoding/json matches a field name: the decoded
// key equal to name under Unicode case folding.
func fieldIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return bytes.EqualFold(key[1:len(key)-1], []byte(name))
	}
	var k string
	if json.Unmarshal(key, &k) != nil {
		return false
	}
	return bytes.EqualFold([]byte(k), []byte(name))
}

// object reads an object at s.i, calling field with each key (raw, with
// its quotes) positioned at the value, which field must consume.
func (s *summarizer) object(field func(key []byte) bool) bool {
	return s.seq('}', func() bool {
		start := s.i
		if !s.str() {
			return false
		}
		key := s.b[start:s.i]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		return field(key)
	})
}

// array reads an array at s.i, calling elem positioned at each element.
func (s *summarizer) array(elem func() bool) bool { return s.seq(']', elem) }

// seq reads the items of an object or array from its opening byte at s.i
// to its closing byte end, separated by commas.
func (s *summarizer) seq(end byte, item func() bool) bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.i++ // '{' or '['
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == end {
		s.i++
		s.depth--
		return true
	}
	for {
		s.ws()
		if !item() {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case end:
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// value validates and skips one value at s.i.
func (s *summarizer) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{':
		return s.object(func([]byte) bool { return s.value() })
	case c == '[':
		return s.array(s.value)
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *summarizer) lit(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

// str validates and skips a string: no control characters, only JSON's
// escapes. A whole conversation is mostly string bytes, and the summary is
// read off every request, so the scan has two speeds: byte by byte for a
// few bytes (code escapes a newline or a quote every few dozen), then, in
// a long plain run, the string's end and the next backslash found with
// bytes.IndexByte (vector instructions) and the bytes before them checked
// for control characters eight at a time. The end, once found, is kept
// until passed, so each byte is searched once however many escapes a
// string has.
func (s *summarizer) str() bool {
	b, i := s.b, s.i
	if i >= len(b) || b[i] != '"' {
		return false
	}
	i++
	q := -1 // the next '"' at or after i once looked for; stale when below i
	for {
		lim := min(i+shortRun, len(b))
		for ; i < lim; i++ {
			if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
				break
			}
		}
		if i == lim && i < len(b) {
			if q < i {
				if q = bytes.IndexByte(b[i:], '"'); q < 0 {
					q = len(b)
				} else {
					q += i
				}
			}
			end := q
			if k := bytes.IndexByte(b[i:q], '\\'); k >= 0 {
				end = i + k
			}
			i = controlFree(b[:end], i)
		}
		if i >= len(b) {
			s.i = i
			return false
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			i++
			if i >= len(b) {
				s.i = i
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(b)-i < 5 {
					s.i = i
					return false
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						s.i = i
						return false
					}
				}
				i += 5
			default:
				s.i = i
				return false
			}
		default: // a control character
			s.i = i
			return false
		}
	}
}

// shortRun is how many bytes str looks at one by one before it searches.
const shortRun = 16

// controlFree is the index of the first byte below 0x20 in b from i on,
// or len(b): 16 bytes at a time (SWAR: exact as to whether some byte of a
// word is below 0x20), then byte by byte.
func controlFree(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+16 <= len(b); i += 16 {
		v, w := binary.LittleEndian.Uint64(b[i:]), binary.LittleEndian.Uint64(b[i+8:])
		if ((v-ones*0x20)&^v|(w-ones*0x20)&^w)&highs != 0 {
			break
		}
	}
	for ; i < len(b) && b[i] >= 0x20; i++ {
	}
	return i
}

// number validates and skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *summarizer) number() bool {
	digits := func() bool {
		start := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i > start
	}
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return false
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if !digits() {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !digits() {
			return false
		}
	}
	return true
}
