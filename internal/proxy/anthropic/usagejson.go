package anthropic

import "strconv"

// jsonUsage is what the proxy takes from a JSON (non-streaming) answer:
// the model, the usage object, and count_tokens' top-level input_tokens.
type jsonUsage struct {
	Model       string
	ID          string // "" unless a string
	Usage       Usage
	InputTokens int64
}

// scanJSONUsage reads an answer body as json.Unmarshal into
//
//	struct {
//		Model       string `json:"model"`
//		Usage       Usage  `json:"usage"`
//		InputTokens int64  `json:"input_tokens"`
//	}
//
// would (and the top-level "id", when it is a string; any other value of
// it is ignored), with ok false wherever json.Unmarshal returns an error (a syntax
// error, or a value of the wrong type anywhere, an integer out of range
// included). It validates the whole body in one pass and decodes only
// those values; the differential fuzz target FuzzJSONUsage holds it to
// json.Unmarshal. json.Unmarshal spent most of its time on its own set-up
// for the proxy's small answers.
func scanJSONUsage(b []byte) (jsonUsage, bool) {
	var r jsonUsage
	s := &summarizer{b: b}
	intField := func(v []byte, dst *int64) {
		if string(v) == "null" {
			return
		}
		if c := v[0]; c != '-' && (c < '0' || c > '9') {
			s.typeErr = true
			return
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil { // a fraction, an exponent, out of range
			s.typeErr = true
			return
		}
		*dst = n
	}
	usage := func() bool {
		if s.i < len(s.b) && s.b[s.i] == '{' {
			// A repeated "usage" fills the same struct, as json.Unmarshal does.
			return s.object(func(key []byte) bool {
				start := s.i
				if !s.value() {
					return false
				}
				v := s.b[start:s.i]
				switch {
				case fieldIs(key, "input_tokens"):
					intField(v, &r.Usage.InputTokens)
				case fieldIs(key, "output_tokens"):
					intField(v, &r.Usage.OutputTokens)
				case fieldIs(key, "cache_creation_input_tokens"):
					intField(v, &r.Usage.CacheCreationInputTokens)
				case fieldIs(key, "cache_read_input_tokens"):
					intField(v, &r.Usage.CacheReadInputTokens)
				}
				return true
			})
		}
		return s.nullOnly()
	}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '{' {
		ok := s.object(func(key []byte) bool {
			if fieldIs(key, "usage") {
				return usage()
			}
			start := s.i
			if !s.value() {
				return false
			}
			switch v := s.b[start:s.i]; {
			case fieldIs(key, "model"):
				s.stringField(v, &r.Model)
			case fieldIs(key, "input_tokens"):
				intField(v, &r.InputTokens)
			case fieldIs(key, "id"):
				r.ID = ""
				if v[0] == '"' {
					s.stringField(v, &r.ID)
				}
			}
			return true
		})
		if !ok {
			return jsonUsage{}, false
		}
	} else if !s.nullOnly() {
		return jsonUsage{}, false
	}
	s.ws()
	if s.i != len(s.b) || s.typeErr {
		return jsonUsage{}, false
	}
	return r, true
}
