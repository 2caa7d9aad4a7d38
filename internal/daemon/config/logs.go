package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Logs caps each session's decision log ([logs]): the lines `paddock logs`
// and `paddock ledger` read, and that the Runner reads its token totals
// back from. The log is rotated into numbered parts; the parts that break
// a cap are dropped oldest first, their token totals carried over (see
// package decisionlog). 0 means no cap.
type Logs struct {
	// MaxSize caps one session's log, its rotated parts included, in
	// bytes ("64MiB", "1GB", or a number).
	MaxSize ByteSize `toml:"max_size"`
	// MaxAge drops a rotated part once its newest line is older than this.
	MaxAge Duration `toml:"max_age"`
}

// DefaultLogsMaxSize is logs.max_size when the file leaves it out.
const DefaultLogsMaxSize = 256 << 20

// minLogsMaxSize keeps a cap above a few lines: a part is a quarter of it.
const minLogsMaxSize = 64 << 10

func (l Logs) validate() error {
	if l.MaxSize != 0 && l.MaxSize < minLogsMaxSize {
		return &Error{Key: "logs.max_size", Msg: fmt.Sprintf("%d bytes is below the least cap, %d (64KiB); 0 keeps everything", l.MaxSize, minLogsMaxSize)}
	}
	if l.MaxAge < 0 || l.MaxAge != 0 && l.MaxAge.D() < time.Minute {
		return &Error{Key: "logs.max_age", Msg: fmt.Sprintf("%s: use 1m or more, or 0 to keep lines of any age", l.MaxAge.D())}
	}
	return nil
}

// ByteSize is a size in bytes, written as a number or a string with a unit:
// B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	n      int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *ByteSize) UnmarshalText(t []byte) error {
	s := strings.TrimSpace(string(t))
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size: write a whole number of bytes, or one with a unit (512KiB, 64MiB, 1GB)", string(t))
	}
	*b = ByteSize(n * mult)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(b), 10)), nil }
