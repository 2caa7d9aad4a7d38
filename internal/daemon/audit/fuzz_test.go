package audit

import "testing"

// FuzzParseLine: ParseLine never panics on any bytes; what it accepts
// survives a round trip through Record's encoding, and Record's clamped
// encoding of it always fits a line and is read back.
func FuzzParseLine(f *testing.F) {
	for _, c := range parseCases {
		f.Add([]byte(c.line))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseLine(b)
		if err != nil {
			return
		}
		line, err := marshalLine(e)
		if err != nil {
			t.Fatalf("accepted %q as %+v, which does not marshal: %v", b, e, err)
		}
		e2, err := ParseLine(line)
		if len(line)-1 > maxLine {
			// Escapes can make a line longer than the one read; Record
			// clamps such an entry (checked below), ParseLine refuses it.
			if err == nil {
				t.Fatalf("accepted a line of %d bytes", len(line)-1)
			}
		} else if err != nil || !sameEntry(e, e2) {
			t.Fatalf("round trip of %q:\n got  %+v (%v)\n want %+v", b, e2, err, e)
		}
		clamped, err := encode(e)
		if err != nil || len(clamped)-1 > maxLine {
			t.Fatalf("Record's encoding of %+v: %d bytes, %v", e, len(clamped), err)
		}
		if _, err := ParseLine(clamped); err != nil {
			t.Fatalf("Record's encoding of %+v is refused: %v", e, err)
		}
	})
}
