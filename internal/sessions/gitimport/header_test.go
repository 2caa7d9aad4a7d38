package gitimport

import (
	"bufio"
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

const (
	oid1   = "bcd36685de43d462b7768f98508d6d94cd2dcb94"
	oid2   = "7ea5d3d86edbc56819dccf6f6c9047e79ac3f90e"
	oid256 = "8f1d3a6a2b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
)

// headerCases are the table of TestParseHeader and the seeds of
// FuzzParseHeader. want is the header parsed (Len is checked apart: it is
// the input's length up to the pack); a case with err wants an error
// holding it.
var headerCases = []struct {
	name string
	in   string
	want Header
	err  string
}{
	{name: "v2 as git writes it", in: "# v2 git bundle\n-" + oid1 + " a\n" + oid2 + " refs/heads/paddock/x\n\nPACK",
		want: Header{Version: 2, ObjectFormat: "sha1", Prerequisites: []Prerequisite{{OID: oid1, Comment: "a"}}, Refs: []Ref{{OID: oid2, Name: "refs/heads/paddock/x"}}}},
	{name: "v3 as git writes it", in: "# v3 git bundle\n@object-format=sha1\n-" + oid1 + " a\n" + oid2 + " refs/heads/paddock/x\n\nPACK",
		want: Header{Version: 3, ObjectFormat: "sha1", Capabilities: []string{"object-format=sha1"}, Prerequisites: []Prerequisite{{OID: oid1, Comment: "a"}}, Refs: []Ref{{OID: oid2, Name: "refs/heads/paddock/x"}}}},
	{name: "v3 sha256", in: "# v3 git bundle\n@object-format=sha256\n" + oid256 + " refs/heads/main\n\n",
		want: Header{Version: 3, ObjectFormat: "sha256", Capabilities: []string{"object-format=sha256"}, Refs: []Ref{{OID: oid256, Name: "refs/heads/main"}}}},
	{name: "v3 without capabilities is sha1", in: "# v3 git bundle\n" + oid2 + " HEAD\n\n",
		want: Header{Version: 3, ObjectFormat: "sha1", Refs: []Ref{{OID: oid2, Name: "HEAD"}}}},
	{name: "prerequisite with no comment, and one with an empty one", in: "# v2 git bundle\n-" + oid1 + "\n-" + oid2 + " \n" + oid2 + " refs/heads/a\n\n",
		want: Header{Version: 2, ObjectFormat: "sha1", Prerequisites: []Prerequisite{{OID: oid1, Bare: true}, {OID: oid2}}, Refs: []Ref{{OID: oid2, Name: "refs/heads/a"}}}},
	{name: "comment of any bytes", in: "# v2 git bundle\n-" + oid1 + " \x1b]0;title\a\r\x00\xff\n" + oid2 + " refs/heads/a\n\n",
		want: Header{Version: 2, ObjectFormat: "sha1", Prerequisites: []Prerequisite{{OID: oid1, Comment: "\x1b]0;title\a\r\x00\xff"}}, Refs: []Ref{{OID: oid2, Name: "refs/heads/a"}}}},
	{name: "hostile names parse (Import refuses them one by one)", in: "# v2 git bundle\n" + oid2 + " ../../x\n" + oid2 + " refs/heads/-evil\n" + oid2 + " refs/tags/v1\n" + oid2 + " HEAD\n" + oid2 + " refs/heads/a\x1bb\r\n\n",
		want: Header{Version: 2, ObjectFormat: "sha1", Refs: []Ref{{oid2, "../../x"}, {oid2, "refs/heads/-evil"}, {oid2, "refs/tags/v1"}, {oid2, "HEAD"}, {oid2, "refs/heads/a\x1bb\r"}}}},
	{name: "no refs", in: "# v2 git bundle\n\n", want: Header{Version: 2, ObjectFormat: "sha1"}},

	{name: "empty", in: "", err: "empty"},
	{name: "no LF after the signature", in: "# v2 git bundle", err: "not the signature"},
	{name: "v1", in: "# v1 git bundle\n\n", err: "not the signature"},
	{name: "v4", in: "# v4 git bundle\n\n", err: "not the signature"},
	{name: "CRLF signature", in: "# v2 git bundle\r\n\n", err: "not the signature"},
	{name: "a pack alone", in: "PACK\x00\x00\x00\x02", err: "not the signature"},
	{name: "no blank line", in: "# v2 git bundle\n" + oid2 + " refs/heads/a\n", err: "cut short"},
	{name: "capability in v2", in: "# v2 git bundle\n@object-format=sha1\n\n", err: "capability in a v2"},
	{name: "unknown capability", in: "# v3 git bundle\n@evil=1\n\n", err: "not one paddock takes"},
	{name: "filter", in: "# v3 git bundle\n@filter=blob:none\n\n", err: "filtered bundle"},
	{name: "object format twice", in: "# v3 git bundle\n@object-format=sha1\n@object-format=sha1\n\n", err: "twice"},
	{name: "unknown object format", in: "# v3 git bundle\n@object-format=md5\n\n", err: "not one paddock takes"},
	{name: "capability after a ref", in: "# v3 git bundle\n" + oid2 + " refs/heads/a\n@object-format=sha1\n\n", err: "capability after"},
	{name: "prerequisite after a ref", in: "# v2 git bundle\n" + oid2 + " refs/heads/a\n-" + oid1 + " x\n\n", err: "prerequisite after"},
	{name: "uppercase id", in: "# v2 git bundle\n" + strings.ToUpper(oid2) + " refs/heads/a\n\n", err: "lowercase hex"},
	{name: "short id", in: "# v2 git bundle\n" + oid2[:39] + " refs/heads/a\n\n", err: "lowercase hex"},
	{name: "sha256 id in a sha1 bundle", in: "# v2 git bundle\n" + oid256 + " refs/heads/a\n\n", err: "a reference line"},
	{name: "sha1 id in a sha256 bundle", in: "# v3 git bundle\n@object-format=sha256\n" + oid2 + " refs/heads/a\n\n", err: "lowercase hex"},
	{name: "no name", in: "# v2 git bundle\n" + oid2 + "\n\n", err: "a reference line"},
	{name: "empty name", in: "# v2 git bundle\n" + oid2 + " \n\n", err: "a reference line"},
	{name: "tab for space", in: "# v2 git bundle\n" + oid2 + "\trefs/heads/a\n\n", err: "a reference line"},
	{name: "prerequisite without space", in: "# v2 git bundle\n-" + oid1 + "x\n\n", err: "no space"},
	{name: "name twice", in: "# v2 git bundle\n" + oid2 + " refs/heads/a\n" + oid1 + " refs/heads/a\n\n", err: "named twice"},
	{name: "CRLF blank line", in: "# v2 git bundle\n" + oid2 + " refs/heads/a\n\r\n", err: "lowercase hex"},
	{name: "too long", in: "# v2 git bundle\n-" + oid1 + " " + strings.Repeat("x", MaxHeader) + "\n\n", err: "past 1048576 bytes"},
}

func TestParseHeader(t *testing.T) {
	for _, tc := range headerCases {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 16) // small: lines span reads
			h, err := ParseHeader(br)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errdefs.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("got %+v, %v; want an error holding %q", h, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.Len = strings.Index(tc.in, "\n\n") + 2
			if !reflect.DeepEqual(h, want) {
				t.Fatalf("got  %+v\nwant %+v", h, want)
			}
			rest, _ := io.ReadAll(br)
			if string(rest) != tc.in[want.Len:] {
				t.Fatalf("left %q after the header, want %q", rest, tc.in[want.Len:])
			}
		})
	}
}

// FuzzParseHeader: no input panics or reads past MaxHeader; what parses
// is exactly what encode writes back (the parser is strict enough that a
// header has one spelling), and the reader is left at the pack.
func FuzzParseHeader(f *testing.F) {
	for _, tc := range headerCases {
		if len(tc.in) < 4096 {
			f.Add([]byte(tc.in))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		h, err := ParseHeader(br)
		if err != nil {
			if !errdefs.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if h.Len > MaxHeader || h.Len > len(data) {
			t.Fatalf("Len %d of %d bytes", h.Len, len(data))
		}
		if enc := h.encode(); !bytes.Equal(enc, data[:h.Len]) {
			t.Fatalf("encode gives %q, the input was %q", enc, data[:h.Len])
		}
		rest, _ := io.ReadAll(br)
		if !bytes.Equal(rest, data[h.Len:]) {
			t.Fatalf("left %q after the header", rest)
		}
		size := map[string]int{"sha1": 40, "sha256": 64}[h.ObjectFormat]
		for _, r := range h.Refs {
			if len(r.OID) != size || r.Name == "" || strings.Contains(r.Name, "\n") {
				t.Fatalf("ref %+v", r)
			}
		}
		for _, p := range h.Prerequisites {
			if len(p.OID) != size || strings.Contains(p.Comment, "\n") {
				t.Fatalf("prerequisite %+v", p)
			}
		}
	})
}

// encode writes h back as git would.
func (h Header) encode() []byte {
	var b bytes.Buffer
	if h.Version == 3 {
		b.WriteString(sigV3 + "\n")
	} else {
		b.WriteString(sigV2 + "\n")
	}
	for _, c := range h.Capabilities {
		b.WriteString("@" + c + "\n")
	}
	for _, p := range h.Prerequisites {
		b.WriteString("-" + p.OID)
		if !p.Bare {
			b.WriteString(" " + p.Comment)
		}
		b.WriteByte('\n')
	}
	for _, r := range h.Refs {
		b.WriteString(r.OID + " " + r.Name + "\n")
	}
	b.WriteByte('\n')
	return b.Bytes()
}
