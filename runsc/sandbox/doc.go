// Package sandbox runs untrusted code in gVisor sandboxes and owns everything a sandbox has on
// the host. A Manager starts sandboxes (Start) with runsc's runtime: each gets an OCI bundle
// (Spec), its own cgroup with limits, a capped /work (or a workspace of the caller's), and, with
// network, its own network namespace, veth pair and firewall chain; Destroy removes all of it. A
// sandbox is OneRun (its first process takes one run and it is destroyed after: the python kind)
// or LongLived (it runs many processes, Exec, until destroyed). A Pool hands out OneRun sandboxes,
// at most Max at once, and keeps some started ahead of time. Sweep removes what a crashed process
// left; Instance keeps processes on one prefix from sweeping each other's; Doctor says whether
// this machine can do all of that.
//
// Everything it creates on the host carries a prefix of ours (DefaultPrefix, "toolhost-"), so
// Sweep can remove leftovers without touching anything else.
package sandbox
