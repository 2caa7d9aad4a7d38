// Package errdefs holds the few sentinel errors that every layer of paddock
// wraps with %w. They are mapped to an HTTP status (internal/daemon/api) and to an
// exit code (internal/daemon/cli) in exactly one place each.
package errdefs

import "errors"

var (
	// ErrNotFound: the named object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the object exists, or is in a state that forbids the operation.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the caller's input is wrong; the message says how.
	ErrInvalid = errors.New("invalid argument")
	// ErrForbidden: the caller may not do this, whatever the input.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthorized: the caller did not say who they are in a way the
	// Runner accepts (no API token, or one it does not know).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrUnavailable: a dependency (the Runner, a backend, the credential) is missing.
	ErrUnavailable = errors.New("unavailable")
	// ErrLimit: a configured limit (a person's sessions, tokens) is reached;
	// the message names the limit and its key.
	ErrLimit = errors.New("limit reached")

	// ErrCommandNotFound: a command to run in a box does not exist there
	// (paddock exec exits 127 for it, as docker exec does).
	ErrCommandNotFound = errors.New("command not found")
	// ErrCommandCannotRun: a command to run in a box exists but cannot be
	// run (permission, not an executable; paddock exec exits 126).
	ErrCommandCannotRun = errors.New("command cannot be run")
)

// Is reports whether err wraps target. It is errors.Is, re-exported so
// callers that only classify errors need one import.
func Is(err, target error) bool { return errors.Is(err, target) }
