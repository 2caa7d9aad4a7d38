// Package chansession carries, in a request's context, the session whose
// box channel a connection arrived on. The channel, not anything the box
// sends, is what says which session a request belongs to.
package chansession

import "context"

type key struct{}

// With marks ctx as belonging to session's channel.
func With(ctx context.Context, session string) context.Context {
	return context.WithValue(ctx, key{}, session)
}

// From returns the session of ctx's channel, if it came over one.
func From(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(key{}).(string)
	return s, ok
}
