package sdk

import "os"

// CheckOnlyEnv is set to "1" in the environment of plugins that `toolhost check` starts: the host
// only checks a config and its tools, and stops the plugins when it is done. A kind may then skip
// work that only serving needs, such as keeping sandboxes ready.
const CheckOnlyEnv = "TOOLHOST_CHECK_ONLY"

// CheckOnly says whether this plugin was started by `toolhost check` (see CheckOnlyEnv).
func CheckOnly() bool { return os.Getenv(CheckOnlyEnv) == "1" }
