package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// ReadSecret reads a secret the config names by where it is, not what it
// is: the environment variable env, or the file file (one of the two is
// set; neither gives ""). setting names the pair in messages, like
// "[store] password". A file every user of the machine may read is
// refused.
func ReadSecret(env, file, setting string) (string, error) {
	switch {
	case env != "" && file != "":
		return "", fmt.Errorf("%s_env and %s_file are both set: keep one", setting, setting)
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("%s_env names the environment variable %s, which is not set: "+
				"set it in the host's environment (for systemd, Environment= or EnvironmentFile= in the unit)", setting, env)
		}
		return strings.TrimSpace(v), nil
	case file != "":
		return readSecretFile(file, setting+"_file")
	}
	return "", nil
}

// readSecretFile reads a secret's file, refusing one every user of the
// machine may read.
func readSecretFile(path, key string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("can't read the file %s (%s): %w", path, key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("can't read the file %s (%s): %w", path, key, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("the file %s (%s) is not a regular file", path, key)
	}
	if st.Mode().Perm()&0o004 != 0 {
		return "", fmt.Errorf("the file %s (%s) can be read by every user of this machine: "+
			"run `chmod 600 %s` (and chown it to the host's user)", path, key, path)
	}
	const max = 64 << 10
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return "", fmt.Errorf("can't read the file %s (%s): %w", path, key, err)
	}
	if len(data) > max {
		return "", fmt.Errorf("the file %s (%s) is over 64 KiB: it should hold the secret alone", path, key)
	}
	return strings.TrimSpace(string(data)), nil
}
