package guest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/version"
)

// BinaryName is the slim guest binary's file name, beside paddock's own.
const BinaryName = "paddock-guest"

// FindBinary returns the binary that boxes should carry as their paddock:
// BinaryName beside self (paddock's own executable) when it is a regular
// executable file that reports this paddock's version, or else self,
// whose `guest` command is the same (guest.Main) at a larger cost per
// process. why says, when self is chosen, why paddock-guest was not; it
// is empty when paddock-guest is chosen.
func FindBinary(ctx context.Context, self string) (path, why string) {
	cand := filepath.Join(filepath.Dir(self), BinaryName)
	fi, err := os.Stat(cand)
	if err != nil {
		return self, fmt.Sprintf("no %s beside %s (make build and make install put it there)", BinaryName, self)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return self, fmt.Sprintf("%s is not an executable file", cand)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, cand, "guest", "version")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return self, fmt.Sprintf("%s guest version: %v %s", cand, err, strings.TrimSpace(errb.String()))
	}
	if got, want := strings.TrimSpace(out.String()), version.String(); got != want {
		return self, fmt.Sprintf("%s is version %s, not this paddock's %s (rebuild both: make build)", cand, got, want)
	}
	return cand, ""
}
