package guest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

func waitFor(t *testing.T, b *testenv.Buffer, s string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if strings.Contains(b.String(), s) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never saw %q in %q", s, b.String())
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
