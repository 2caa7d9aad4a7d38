// Package version tells which paddock this is.
package version

import "runtime/debug"

// Version is set at link time with -ldflags "-X .../internal/base/version.Version=v1.2.3";
// otherwise it comes from the module's build info.
var Version = ""

// String returns the version, or "devel" with the VCS revision when known.
func String() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	rev := ""
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			rev = "+" + s.Value[:12]
		}
	}
	return "devel" + rev
}
