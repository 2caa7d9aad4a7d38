// The host processes and uids of boxes: who runs, which uids are retired.

package local

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// hostProcs maps live (non-zombie) processes in the box uid range to their uid.
func hostProcs(base int) map[int]int {
	out := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fi, err := os.Stat("/proc/" + e.Name())
		if err != nil {
			continue
		}
		uid := int(fi.Sys().(*syscall.Stat_t).Uid)
		if uid <= base || uid >= base+65536 {
			continue
		}
		if _, ok := startTime(pid); !ok {
			continue // a zombie: already dead, its parent (or init) reaps it
		}
		out[pid] = uid
	}
	return out
}

// hostUIDs is the set of box-range uids that any process on the host runs as.
func hostUIDs(base int) map[int]bool {
	out := map[int]bool{}
	for _, uid := range hostProcs(base) {
		out[uid] = true
	}
	return out
}

// retired lists uids of removed boxes that may still have processes.
func (b *Backend) retired() []int {
	raw, _ := os.ReadFile(filepath.Join(b.cfg.Root, "retired-uids.json"))
	var out []int
	_ = json.Unmarshal(raw, &out)
	return out
}

func (b *Backend) setRetired(uids []int) {
	raw, _ := json.Marshal(uids)
	_ = atomicfile.WriteNoSync(filepath.Join(b.cfg.Root, "retired-uids.json"), raw, 0o600)
}

// startTime reads a process's start time (field 22 of /proc/<pid>/stat).
func startTime(pid int) (uint64, bool) { return sandbox.ProcStartTime(pid) }

func alive(pid int, start uint64) bool {
	st, ok := startTime(pid)
	return ok && st == start
}
