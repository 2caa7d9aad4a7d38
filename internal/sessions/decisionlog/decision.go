package decisionlog

// Decision is what a proxy did with one request or connection: one word,
// the same in a decision log line's "decision" field, in the Runner's log
// line for it and in the metrics' decision label. The words are part of
// the log's format: stored logs are read back by them, so none changes.
type Decision string

// The credential proxy's decisions (an Entry's Kind is "").
const (
	// Forwarded: the request went upstream, whatever the upstream answered
	// (the Status and Reason say how it went).
	Forwarded Decision = "forwarded"
	// Refused: paddock answered with an error, and nothing went upstream.
	Refused Decision = "refused"
	// Local: paddock answered the request itself (the CLI's preconnect).
	Local Decision = "local"
)

// The egress proxy's decisions (Kind "egress").
const (
	// Allowed: the connection or request went to the address dialed.
	Allowed Decision = "allowed"
	// Denied: refused by the policy, a TLS check or a limit.
	Denied Decision = "denied"
	// Errored: allowed, but dialing or taking the connection over failed.
	Errored Decision = "error"
	// Closed: the client went without sending anything.
	Closed Decision = "closed"
	// Cut: an allowed tunnel ended by a change of policy.
	Cut Decision = "cut"
	// Terminated: a CONNECT to the API host, whose TLS the Runner
	// terminates and whose requests the credential proxy decides on.
	Terminated Decision = "terminated"
	// Changed: no request; the session's egress policy was changed
	// (Method "POLICY").
	Changed Decision = "changed"
)
