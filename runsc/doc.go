// Package runsc drives gVisor's runsc from Go, in the style of go-runc: a Runtime runs runsc's
// verbs (create, start, run, exec, kill, delete, state, list), one method each with an *Opts
// struct, against a state folder of its own; every failure is an *Error carrying the command,
// its exit status and runsc's own words. It also says which runsc toolhost is pinned to
// (PinnedVersion) and which one a binary is (BinaryVersion).
//
// It knows nothing of what runs in a container: the sandbox package builds the OCI bundles and
// owns the sandboxes' lifecycle, pool, cgroups, networks, sweep and checks.
package runsc
