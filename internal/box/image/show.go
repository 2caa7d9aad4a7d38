package image

import (
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client/pkg/jsonmessage"
	"github.com/moby/term"
)

// Show renders a daemon's JSON progress stream (a build, a pull, an import)
// on w as the docker CLI renders it: layer by layer, with progress bars
// redrawn in place when w is a terminal and plain lines when it is not. It
// returns the id the stream names, if it names one (a build's aux message,
// an import's last status: the image id; a push's aux message: the
// manifest's digest), and the daemon's error, if the stream carries one.
func Show(r io.Reader, w io.Writer) (string, error) {
	id := ""
	dec := json.NewDecoder(r)
	msgs := func(yield func(jsonstream.Message, error) bool) {
		for {
			var m jsonstream.Message
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				return
			}
			// docker import ends with the new image's id as its status.
			if s := strings.TrimSpace(m.Status); err == nil && idRef.MatchString(s) {
				id = s
			}
			if !yield(m, err) {
				return
			}
		}
	}
	fd, isTerm := term.GetFdInfo(w)
	err := jsonmessage.DisplayJSONMessages(msgs, w, fd, isTerm, func(m jsonstream.Message) {
		var aux struct{ ID, Digest string }
		if m.Aux != nil && json.Unmarshal(*m.Aux, &aux) == nil {
			switch {
			case aux.ID != "":
				id = aux.ID
			case aux.Digest != "":
				id = aux.Digest // a push names the manifest it wrote
			}
		}
	})
	return id, err
}
