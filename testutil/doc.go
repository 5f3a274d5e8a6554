// Package testutil holds helpers for tests that need real kernel objects:
// network namespaces, veth pairs, a private bpffs and a file-descriptor leak
// check.
//
// The helpers require root (CI runs the tests as root; RequireRoot fails
// rather than skips so that tests are never silently hidden). All traffic
// stays inside namespaces these helpers create, and every helper registers
// its teardown with t.Cleanup so namespaces, links and mounts go away also
// when a test fails. Namespaces are named "xdpfwt-<random>" so that any that
// leak (for example after a crash) are easy to recognise and remove with
// `ip netns del`.
package testutil
