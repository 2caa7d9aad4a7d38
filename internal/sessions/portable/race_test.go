//go:build race

package portable

// raceFactor scales the allocation bounds of the tests: the race detector
// allocates for its own bookkeeping beside what the code does.
const raceFactor = 3
