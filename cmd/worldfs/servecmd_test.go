package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// worldfs serve on an address that is not loopback, without a password,
// is refused before it opens anything, with what to set; a password file
// whose first line is empty is refused too.
func TestServeOffLoopbackNeedsAPassword(t *testing.T) {
	t.Setenv(passwordEnv, "")
	empty := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(empty, []byte("\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		says []string
	}{
		{[]string{"serve", "--bucket", t.TempDir(), "--listen", "0.0.0.0:0"}, []string{"--password-file", passwordEnv, "127.0.0.1"}},
		{[]string{"serve", "--bucket", t.TempDir(), "--listen", "0.0.0.0:0", "--password-file", empty}, []string{"first line is empty"}},
		{[]string{"serve", "--bucket", t.TempDir(), "--tls-cert", "x.pem"}, []string{"--tls-key"}},
	} {
		code, stdout, stderr := cli(t, c.args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and one line", c.args, code, stdout, stderr)
		}
		for _, s := range c.says {
			if !strings.Contains(stderr, s) {
				t.Errorf("%q: %q does not say %q", c.args, stderr, s)
			}
		}
	}
}
