package serve_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/serve"
)

// startup is a startup message of protocol 3.0 with params.
func startup(params ...string) []byte {
	body := binary.BigEndian.AppendUint32(nil, pgproto3.ProtocolVersion30)
	for _, p := range params {
		body = append(append(body, p...), 0)
	}
	body = append(body, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}

// exchange writes data on a new connection to f, then reads what the
// server answers until it closes the connection.
func exchange(t *testing.T, addr string, data []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second)) // a hang fails the test, not the binary
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	out, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("reading the answer: %v", err)
	}
	return out
}

// errorOf decodes the ErrorResponse that answer is (or ends with).
func errorOf(t *testing.T, answer []byte) *pgproto3.ErrorResponse {
	t.Helper()
	fe := pgproto3.NewFrontend(bytes.NewReader(answer), io.Discard)
	var last *pgproto3.ErrorResponse
	for {
		msg, err := fe.Receive()
		if err != nil {
			return last
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			c := *e
			last = &c
		}
	}
}

// TestMalformedStartupsGetAnErrorAndAClosedConnection: a startup packet
// too short, too long, of an unknown version or code, without its
// terminator, or without a user, is answered with an ErrorResponse and
// the connection closed; nothing of a session starts.
func TestMalformedStartupsGetAnErrorAndAClosedConnection(t *testing.T) {
	f := newFixture(t, nil)
	good := startup("user", "u", "database", "w")
	for _, c := range []struct {
		name string
		data []byte
		code string
	}{
		{"a length below the minimum", []byte{0, 0, 0, 2, 0, 0, 0, 0}, "08P01"},
		{"a length past the maximum", []byte{0x7f, 0, 0, 0, 0, 3, 0, 0}, "08P01"},
		{"an unknown code", append([]byte{0, 0, 0, 8}, 0x12, 0x34, 0x56, 0x78), "08P01"},
		{"protocol 2", append([]byte{0, 0, 0, 9}, 0, 2, 0, 0, 0), "08P01"},
		{"no terminator", good[:len(good)-1], ""},
		{"a name without its value", startup("user"), "08P01"},
		{"no user", startup("database", "w"), "28000"},
		{"no such world", startup("user", "u", "database", "nope"), "3D000"},
		{"not a world's name", startup("user", "u", "database", "../etc"), "3D000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := c.data
			if c.name == "no terminator" {
				// The length says one byte more than is sent: the server
				// waits for it, then sees the connection close.
				data = append([]byte{}, good...)
				data = data[:len(data)-1]
			}
			answer := exchange(t, f.addr, data)
			e := errorOf(t, answer)
			if c.code == "" {
				if e != nil {
					t.Errorf("answered %+v", e)
				}
				return
			}
			if e == nil || e.Code != c.code || e.Severity != "FATAL" {
				t.Fatalf("answered %q, want a FATAL error %s", answer, c.code)
			}
			if len(e.Message) < 10 {
				t.Errorf("the error says only %q", e.Message)
			}
		})
	}
	if n := f.srv.Stats().Sessions; n != 0 {
		t.Errorf("%d sessions after malformed startups", n)
	}
}

// TestOffLoopbackNeedsAPassword: an address that is not loopback is
// refused without a password, with what to set; with one, or on
// loopback, it is not.
func TestOffLoopbackNeedsAPassword(t *testing.T) {
	for _, c := range []struct {
		addr     string
		password bool
		refused  bool
	}{
		{"0.0.0.0:5433", false, true},
		{"192.0.2.7:5433", false, true},
		{"[::]:5433", false, true},
		{"example.com:5433", false, true},
		{"0.0.0.0:5433", true, false},
		{"127.0.0.1:5433", false, false},
		{"127.0.0.2:5433", false, false},
		{"[::1]:5433", false, false},
		{"localhost:5433", false, false},
	} {
		err := serve.CheckListen(c.addr, c.password)
		if c.refused != (err != nil) {
			t.Errorf("%s (password %v): %v", c.addr, c.password, err)
			continue
		}
		if c.refused && (!errors.Is(err, serve.ErrNeedsPassword) || !strings.Contains(err.Error(), "--password-file") || !strings.Contains(err.Error(), "WORLDFS_SERVE_PASSWORD")) {
			t.Errorf("%s: %v: want a refusal naming --password-file and WORLDFS_SERVE_PASSWORD", c.addr, err)
		}
	}
}

// TestPasswordAndTLS: with a password, a client authenticates by
// SCRAM-SHA-256 (a wrong password is refused with 28P01); with a
// certificate, a client that requires TLS gets it, and without one it is
// told the server has none.
func TestPasswordAndTLS(t *testing.T) {
	cert := selfSigned(t)
	f := newFixture(t, func(o *serve.Options) {
		o.Password = "s3cret"
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	})
	ctx := enginetest.Context(t)
	c, err := pgx.Connect(ctx, f.dsn("w", "password=s3cret", "sslmode=require"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, ok := c.PgConn().Conn().(*tls.Conn); !ok {
		t.Errorf("sslmode=require: the connection is a %T, not TLS", c.PgConn().Conn())
	}
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM particle_at(2)").Scan(&n); err != nil || n == 0 {
		t.Fatalf("over TLS with the password: %d, %v", n, err)
	}
	if _, err := pgx.Connect(ctx, f.dsn("w", "password=wrong")); pgCode(err) != "28P01" {
		t.Errorf("a wrong password: %v, want SQLSTATE 28P01", err)
	}
	if _, err := pgx.Connect(ctx, f.dsn("w")); err == nil {
		t.Errorf("no password: connected")
	}
	plain := newFixture(t, nil)
	if _, err := pgx.Connect(ctx, plain.dsn("w", "sslmode=require")); err == nil || !strings.Contains(err.Error(), "refused TLS") {
		t.Errorf("sslmode=require without a certificate: %v, want the server to refuse TLS", err)
	}
}

// selfSigned is a certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// FuzzSession sends a valid startup, then any bytes, as a client's
// messages: the server answers or closes the connection, never panics
// (a session's panic is counted), and goes on serving.
func FuzzSession(f *testing.F) {
	q := func(msgs ...pgproto3.FrontendMessage) []byte {
		var out []byte
		for _, m := range msgs {
			out, _ = m.Encode(out)
		}
		return out
	}
	f.Add(q(&pgproto3.Query{String: "SELECT count(*) FROM particle_at(1)"}))
	f.Add(q(&pgproto3.Parse{Query: "SELECT * FROM particle_at($1)"}, &pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Sync{},
		&pgproto3.Bind{Parameters: [][]byte{[]byte("1")}}, &pgproto3.Execute{MaxRows: 2}, &pgproto3.Execute{}, &pgproto3.Sync{}))
	f.Add(q(&pgproto3.Bind{PreparedStatement: "nope", Parameters: [][]byte{nil}}, &pgproto3.Sync{}))
	f.Add(q(&pgproto3.Describe{ObjectType: 'P', Name: "none"}, &pgproto3.Execute{Portal: "none"}, &pgproto3.Close{ObjectType: 'P', Name: "none"}, &pgproto3.Sync{}))
	f.Add(q(&pgproto3.Query{String: "BEGIN; SELECT 1; SET worldfs.at = '2'; COMMIT"}))
	f.Add([]byte{'Q', 0, 0, 0, 3})
	f.Add([]byte{'B', 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{'P', 0, 0, 0, 8, 0, 0, 0, 0})
	fx := newFixture(f, nil) // one server for every input
	f.Fuzz(func(t *testing.T, data []byte) {
		exchange(t, fx.addr, append(startup("user", "u", "database", "w"), data...))
		if n := fx.srv.Stats().Panics; n != 0 {
			t.Fatalf("%d sessions panicked", n)
		}
	})
}
