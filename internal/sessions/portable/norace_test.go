//go:build !race

package portable

// raceFactor scales the allocation bounds of the tests (see race_test.go).
const raceFactor = 1
