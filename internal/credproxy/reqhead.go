package credproxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"

	"golang.org/x/net/http/httpguts"
)

// readRequest reads one request from br: the common, strictly formed
// request head by parseRequestHead, any other by http.ReadRequest.
//
// The two give the same *http.Request for every head parseRequestHead
// takes (FuzzRequestHead holds them equal, body framing included), so what
// a client can send, and what paddock makes of it, is net/http's. The fast
// path exists because a proxy's small request spends more in
// textproto's allocations (two dozen per head) than in its own work; it
// takes one string for the whole head, one slice for the values and one
// map, and leaves every head it is not certain of to net/http, before
// consuming a byte of it.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	if req := parseRequestHead(br); req != nil {
		return req, nil
	}
	return http.ReadRequest(br)
}

// parseRequestHead parses the request head at the start of br if it is
// already buffered whole (or arrives with the bytes that follow the first
// one) and is in the strict form below; it then consumes the head and
// returns the request, with a body of its Content-Length reading from br.
// Otherwise it returns nil with br as it found it, bar bytes buffered.
//
// The strict form: a request line "METHOD /target HTTP/1.1" (a token
// method other than CONNECT and PRI, an origin-form target of printable
// ASCII); header lines "Name: value" ending in CRLF, the name a token, the
// value free of control bytes other than HTAB; no line folding; at most one
// Host and at most one Content-Length, all digits; no Transfer-Encoding,
// Trailer or Pragma header. Everything else, valid or not, is net/http's
// to accept or refuse.
func parseRequestHead(br *bufio.Reader) *http.Request {
	buf, end := bufferedHead(br)
	if end < 0 {
		return nil
	}
	head := buf[:end] // up to and including the empty line's CRLF

	// The request line.
	lineEnd := bytes.IndexByte(head, '\n')
	line := head[:lineEnd]
	if len(line) == 0 || line[len(line)-1] != '\r' {
		return nil
	}
	line = line[:len(line)-1]
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return nil
	}
	method, rest := line[:sp1], line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return nil
	}
	target, proto := rest[:sp2], rest[sp2+1:]
	if string(proto) != "HTTP/1.1" || target[0] != '/' {
		return nil
	}
	for _, c := range method {
		if !httpguts.IsTokenRune(rune(c)) {
			return nil
		}
	}
	if string(method) == "CONNECT" || string(method) == "PRI" {
		return nil
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f {
			return nil
		}
	}

	// The header lines: count them, check them, and size the copy that
	// holds their canonical names and trimmed values.
	fields := head[lineEnd+1 : end-2]
	n, size := 0, 0
	for rest := fields; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 1 || rest[i-1] != '\r' {
			return nil
		}
		name, value, ok := splitField(rest[:i-1])
		if !ok {
			return nil
		}
		n++
		size += len(name) + len(value)
		rest = rest[i+1:]
	}

	// One string holds the method, the target and every name and value;
	// the header's strings are slices of it.
	text := make([]byte, 0, len(method)+len(target)+size)
	text = append(text, method...)
	text = append(text, target...)
	type span struct{ name, value [2]int }
	var spansArr [32]span
	spans := spansArr[:0]
	hosts, lengths := 0, 0
	for rest := fields; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		name, value, _ := splitField(rest[:i-1])
		rest = rest[i+1:]
		var s span
		s.name[0] = len(text)
		text = appendCanonical(text, name)
		s.name[1] = len(text)
		switch string(text[s.name[0]:s.name[1]]) {
		case "Transfer-Encoding", "Trailer", "Pragma":
			return nil
		case "Host":
			hosts++
		case "Content-Length":
			lengths++
			if len(value) == 0 || len(value) > 18 {
				return nil
			}
			for _, c := range value {
				if c < '0' || c > '9' {
					return nil
				}
			}
		}
		s.value[0] = len(text)
		text = append(text, value...)
		s.value[1] = len(text)
		spans = append(spans, s)
	}
	if hosts > 1 || lengths > 1 {
		return nil
	}
	str := string(text)
	u, err := url.ParseRequestURI(str[len(method) : len(method)+len(target)])
	if err != nil {
		return nil
	}

	values := make([]string, n)
	h := make(http.Header, n)
	host := ""
	for i, s := range spans {
		name := str[s.name[0]:s.name[1]]
		values[i] = str[s.value[0]:s.value[1]]
		if name == "Host" {
			host = values[i] // http.ReadRequest moves it to req.Host
			continue
		}
		if prev, ok := h[name]; ok {
			h[name] = append(prev, values[i])
			continue
		}
		h[name] = values[i : i+1 : i+1]
	}

	req := &http.Request{
		Method:     str[:len(method)],
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Body:       http.NoBody,
		Host:       host, // the target is in origin form: no host of its own
		RequestURI: str[len(method) : len(method)+len(target)],
	}
	req.Close = httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	if cl := h["Content-Length"]; len(cl) == 1 {
		var length int64
		for _, c := range []byte(cl[0]) {
			length = length*10 + int64(c-'0')
		}
		req.ContentLength = length
		if length > 0 {
			req.Body = &lengthBody{br: br, n: length}
		}
	}
	if _, err := br.Discard(end); err != nil {
		return nil // cannot be: the head is buffered
	}
	return req
}

// bufferedHead returns br's buffered bytes and the offset just past the
// empty line ending the head at their start, or -1 if the head does not
// end within them. It reads once more if what is buffered holds no whole
// head yet and there is room for more, as http.ReadRequest would.
func bufferedHead(br *bufio.Reader) ([]byte, int) {
	for try := 0; ; try++ {
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			return buf, i + 4
		}
		if try == 1 || br.Buffered() == br.Size() {
			return nil, -1
		}
		// A Peek error leaves what is buffered, and the error comes
		// again from the connection, for http.ReadRequest.
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return nil, -1
		}
	}
}

// splitField splits a header line (without its CRLF) into its name and
// its value with the surrounding spaces and tabs trimmed, and reports
// whether the line is in the strict form parseRequestHead takes.
func splitField(line []byte) (name, value []byte, ok bool) {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return nil, nil, false
	}
	name, value = line[:colon], line[colon+1:]
	for _, c := range name {
		if !httpguts.IsTokenRune(rune(c)) {
			return nil, nil, false
		}
	}
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			return nil, nil, false
		}
	}
	for len(value) > 0 && (value[0] == ' ' || value[0] == '\t') {
		value = value[1:]
	}
	for len(value) > 0 && (value[len(value)-1] == ' ' || value[len(value)-1] == '\t') {
		value = value[:len(value)-1]
	}
	return name, value, true
}

// appendCanonical appends the canonical form of the token name
// (textproto.CanonicalMIMEHeaderKey's: upper case first and after each
// dash, lower case elsewhere).
func appendCanonical(dst, name []byte) []byte {
	upper := true
	for _, c := range name {
		switch {
		case upper && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case !upper && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		dst = append(dst, c)
		upper = c == '-'
	}
	return dst
}

// lengthBody is a request body of a declared length read from the
// connection's buffer, as net/http's own: io.EOF with its last bytes,
// io.ErrUnexpectedEOF if the connection ends before them.
type lengthBody struct {
	br *bufio.Reader
	n  int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	k, err := b.br.Read(p)
	b.n -= int64(k)
	switch {
	case err == io.EOF && b.n > 0:
		err = io.ErrUnexpectedEOF
	case err == nil && b.n == 0:
		err = io.EOF
	}
	return k, err
}

func (b *lengthBody) Close() error { return nil }
