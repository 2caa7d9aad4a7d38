//go:build paddock_pre21guest

package guest

// pre21Streams: see streams.go. This build is a test's older guest.
const pre21Streams = true
