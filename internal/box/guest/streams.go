//go:build !paddock_pre21guest

package guest

// pre21Streams makes the guest answer the put and selftest streams as a
// guest from before them did ("unknown stream type"): only in a binary
// built with the paddock_pre21guest tag, which tests build to hold the
// Runner's fallbacks for older guests (testenv.OlderGuestBinary).
const pre21Streams = false
