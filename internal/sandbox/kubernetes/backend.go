package kubernetes

// Backend is the kubernetes backend.
type Backend struct {
	cfg Config
}
