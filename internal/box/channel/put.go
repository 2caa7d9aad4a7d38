package channel

import (
	"fmt"
	"time"
)

// TypePut writes files in the box from the guest's own process
// (Runner → guest), with no process started for it. Header.Files names
// them with their sizes and Header.Aside the files to keep aside first
// (each renamed to <path>.invalid); after an OK reply the Runner sends
// the files' bytes one after another, and the guest answers with a second
// reply once every file is written (each atomically: a temporary file
// beside it, then a rename; mode 0600, parent directories made 0700). A
// guest older than this answers ErrUnknownType.
const TypePut = "put"

// PutFile is one file of a put.
type PutFile struct {
	Path string `json:"path"`
	Size int    `json:"size"`
	Data []byte `json:"-"`
}

// MaxPut bounds the bytes of one put.
const MaxPut = 64 << 20

// Put has the guest keep aside the files of aside, then write files.
func (c *Client) Put(files []PutFile, aside []string, deadline time.Time) error {
	h := Header{Type: TypePut, Files: files, Aside: aside}
	total := 0
	for i := range files {
		files[i].Size = len(files[i].Data)
		total += files[i].Size
	}
	if total > MaxPut {
		return fmt.Errorf("channel: put: %d bytes, more than %d", total, MaxPut)
	}
	st, br, err := c.open(h, deadline)
	if err != nil {
		return unknownType(err)
	}
	defer st.Close()
	if !deadline.IsZero() {
		_ = st.SetDeadline(deadline)
	}
	for _, f := range files {
		if _, err := st.Write(f.Data); err != nil {
			return fmt.Errorf("channel: put: %w", err)
		}
	}
	var r Reply
	if err := ReadJSONLine(br, &r); err != nil {
		return fmt.Errorf("channel: put: read its result: %w", err)
	}
	if !r.OK {
		return &RemoteError{Op: TypePut, Msg: r.Error}
	}
	return nil
}
