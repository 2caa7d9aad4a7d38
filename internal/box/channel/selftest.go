package channel

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// TypeSelfTest asks the guest to run the egress self-test itself, in its
// own process (Runner → guest): Header.Addr is the box's egress proxy
// address, if any. After an OK reply the guest writes the checks as JSON
// lines (what `paddock guest selftest` prints) and closes the stream. A
// guest older than this answers "unknown stream type"
// (ErrUnknownType); the Runner then runs the self-test as a process.
const TypeSelfTest = "selftest"

// maxSelfTest bounds what the Runner reads of a self-test's answer.
const maxSelfTest = 64 << 10

// ErrUnknownType is a stream type the guest does not know: an older
// guest.
var ErrUnknownType = errors.New("the guest does not know this stream type")

// unknownType makes a guest's refusal of a stream type it does not know
// ErrUnknownType; other errors are returned as they are.
func unknownType(err error) error {
	var re *RemoteError
	if errors.As(err, &re) && strings.HasPrefix(re.Msg, "unknown stream type") {
		return fmt.Errorf("%w: %v", ErrUnknownType, err)
	}
	return err
}

// SelfTest has the guest run its self-test and returns the checks' JSON
// lines.
func (c *Client) SelfTest(proxy string, deadline time.Time) (string, error) {
	st, br, err := c.open(Header{Type: TypeSelfTest, Addr: proxy}, deadline)
	if err != nil {
		return "", unknownType(err)
	}
	defer st.Close()
	if !deadline.IsZero() {
		_ = st.SetReadDeadline(deadline)
	}
	b, err := io.ReadAll(io.LimitReader(br, maxSelfTest+1))
	if err != nil {
		return "", fmt.Errorf("channel: selftest: %w", err)
	}
	if len(b) > maxSelfTest {
		return "", fmt.Errorf("channel: selftest: more than %d bytes of answer", maxSelfTest)
	}
	return string(b), nil
}
