package runner

import _ "embed" // the box's shell scripts, below

// The shell scripts the Runner runs in a box, one file each under
// scripts/, embedded as tailscale's net/dns embeds its own. Each file
// opens with a comment that says what it does, its arguments, its stdin
// and its exit status; it is run as
//
//	sh -c SCRIPT sh ARG...
//
// so that its arguments are $1 and on. What it needs from the Runner's
// constants (paths, socket names) comes as arguments, never pasted into
// its text: the file is the script the box runs, whole. A new script is a
// new file there and a var here; TestBoxScripts checks every file's
// syntax and header.
var (
	// launchScript (re)starts tmux with claude: startTmux, start.go.
	//go:embed scripts/launch.sh
	launchScript string

	// readConfigScript prints Claude Code's two config files: readBoxConfig, start.go.
	//go:embed scripts/readconfig.sh
	readConfigScript string

	// writeFileScript writes stdin to a file (the CA certificate): putConfig, start.go.
	//go:embed scripts/writefile.sh
	writeFileScript string

	// transcriptScript prints the end of a transcript and its subagents': readTranscript, ledger.go.
	//go:embed scripts/transcript.sh
	transcriptScript string

	// readStateScript tars up Claude Code's state: readBoxState, portable.go.
	//go:embed scripts/readstate.sh
	readStateScript string

	// exitWrapScript runs claude in its pane and records its exit: exitWrap, pane.go.
	//go:embed scripts/exitwrap.sh
	exitWrapScript string

	// paneStateScript tells whether claude's pane is dead, and how: checkPane, pane.go.
	//go:embed scripts/panestate.sh
	paneStateScript string

	// cloneScript makes a clone session's working copy: setupClone, clone.go.
	//go:embed scripts/clone.sh
	cloneScript string

	// cloneStreamScript makes one from a pack streamed in, where the box
	// cannot see the host repository: setupClone, clone.go.
	//go:embed scripts/clonestream.sh
	cloneStreamScript string

	// diffScript prints a clone session's change: DiffSession, clone.go.
	//go:embed scripts/diff.sh
	diffScript string

	// branchStateScript says where a clone's branch is: FetchSession, clone.go.
	//go:embed scripts/branchstate.sh
	branchStateScript string

	// writeStateScript untars Claude Code's state: writeBoxState, portable.go.
	//go:embed scripts/writestate.sh
	writeStateScript string
)
