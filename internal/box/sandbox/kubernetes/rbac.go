package kubernetes

// apiCall is one kind of request the backend makes to the API server.
type apiCall struct{ group, resource, verb string }

// apiCalls are all the requests the backend makes, in its namespace only:
// the Role of contrib/kubernetes/role.yaml grants exactly these
// (TestRoleGrantsWhatTheBackendCalls). Add a call here and to the Role
// together.
var apiCalls = []apiCall{
	{"", "pods", "create"}, // Start
	{"", "pods", "delete"}, // Stop, Remove, prune
	{"", "pods", "get"},    // Start's wait, Inspect, Connect
	{"", "pods", "list"},   // List
	{"", "pods", "watch"},  // Start's wait for Running
	// The exec stream; over WebSocket it is a GET that the API server
	// authorizes as create (1.31+).
	{"", "pods/exec", "create"},
	{"", "persistentvolumeclaims", "create"},           // Create
	{"", "persistentvolumeclaims", "delete"},           // Remove, prune
	{"", "persistentvolumeclaims", "get"},              // Start's reason for a Pending pod
	{"", "persistentvolumeclaims", "list"},             // List
	{"", "events", "list"},                             // Start's reason for a Pending pod
	{"networking.k8s.io", "networkpolicies", "create"}, // Create
	{"networking.k8s.io", "networkpolicies", "delete"}, // Remove, prune
	{"networking.k8s.io", "networkpolicies", "get"},    // Start, Inspect
	{"networking.k8s.io", "networkpolicies", "list"},   // List
	{"networking.k8s.io", "networkpolicies", "patch"},  // Start marks the record started
}
