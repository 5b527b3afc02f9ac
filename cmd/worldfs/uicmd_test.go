package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"
)

// startUI runs worldfs ui with args until the test ends and returns the
// URL it printed and everything it printed before it.
func startUI(t *testing.T, args ...string) (*url.URL, string) {
	t.Helper()
	keepHome(t)
	ctx, cancel := context.WithCancel(enginetest.Context(t))
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		var errb strings.Builder
		code <- run(ctx, append([]string{"ui"}, args...), pw, &errb)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, pr)
		if c := <-code; c != 0 {
			t.Errorf("worldfs ui exited %d", c)
		}
	})
	var printed strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		printed.WriteString(line + "\n")
		if s := strings.TrimSpace(line); strings.HasPrefix(s, "http://") {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			// Ask it on loopback whatever address it printed.
			_, port, _ := net.SplitHostPort(u.Host)
			u.Host = "127.0.0.1:" + port
			return u, printed.String()
		}
	}
	t.Fatalf("worldfs ui printed no URL:\n%s", printed.String())
	return nil, ""
}

func httpStatus(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// worldfs ui serves loopback without a token; on any other address it
// makes a token, prints it in the URL and says why, and refuses requests
// without it.
func TestUIRequiresATokenOffLoopback(t *testing.T) {
	dir := t.TempDir()
	u, printed := startUI(t, "--bucket", dir, "--cache-dir", t.TempDir())
	if u.Query().Get("token") != "" || strings.Contains(printed, "token") {
		t.Fatalf("on loopback: %s", printed)
	}
	if c := httpStatus(t, u.String()+"api/worlds"); c != 200 {
		t.Fatalf("loopback: %d", c)
	}

	u, printed = startUI(t, "--bucket", dir, "--cache-dir", t.TempDir(), "--listen", "0.0.0.0:0")
	token := u.Query().Get("token")
	if len(token) < 32 || !strings.Contains(printed, "0.0.0.0:0 is not a loopback address, so every request needs this server's token") {
		t.Fatalf("off loopback, no token printed:\n%s", printed)
	}
	base := "http://" + u.Host + "/"
	if c := httpStatus(t, base+"api/worlds"); c != http.StatusForbidden {
		t.Fatalf("without the token: %d", c)
	}
	if c := httpStatus(t, base+"api/worlds?token="+token); c != 200 {
		t.Fatalf("with the token: %d", c)
	}

	code, _, stderr := cli(t, "ui", "--bucket", dir, "--listen", "8080")
	if code != 2 || !strings.Contains(stderr, `--listen "8080": want HOST:PORT`) {
		t.Fatalf("--listen 8080: exit %d\n%s", code, stderr)
	}
}
