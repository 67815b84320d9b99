// Package runsc drives gVisor's runsc from Go so that untrusted code runs behind a kernel boundary:
// it builds OCI bundles, runs the runtime's verbs (create, start, run, exec, kill, delete, state,
// list), gives each sandbox its own cgroup, capped /work, network namespace and firewall chain,
// prepares sandboxes ahead of time that then take exactly one run, keeps a pool of them ready
// (Pool), sweeps away whatever a crashed host left behind, and says whether this machine can do
// all of that (Doctor).
//
// Everything it creates on the host carries a prefix of ours (Prefix, "toolhost-" by default), so
// Sweep can remove leftovers without touching anything else.
package runsc
