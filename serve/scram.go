package serve

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SCRAM-SHA-256 (RFC 5802, RFC 7677), the server's side, as PostgreSQL
// does it: the user name in the client's first message is ignored (the
// startup message names the user), no channel binding is offered, and
// the password is used as its UTF-8 bytes (libpq applies SASLprep, which
// leaves an ASCII password as it is).

// scramMechanism is the one mechanism offered.
const scramMechanism = "SCRAM-SHA-256"

// scramIterations is PostgreSQL's default (scram_iterations).
const scramIterations = 4096

// verifier is what the server keeps of the password: never the password.
type verifier struct {
	salt                 []byte
	iterations           int
	storedKey, serverKey []byte
}

// newVerifier derives the keys of password with a fresh salt.
func newVerifier(password string) (*verifier, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	if err != nil {
		return nil, err
	}
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	return &verifier{salt: salt, iterations: scramIterations, storedKey: stored[:], serverKey: hmacSHA256(salted, "Server Key")}, nil
}

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// errBadPassword: the client's proof does not match the password.
var errBadPassword = errors.New("password authentication failed")

// scram is one exchange.
type scram struct {
	v *verifier
	// clientFirstBare, serverFirst and nonce are kept for the final
	// message's check.
	clientFirstBare, serverFirst, nonce string
}

// first takes the client's first message and returns the server's.
func (s *scram) first(msg []byte) (string, error) {
	m := string(msg)
	// gs2-header: n,, (no channel binding) or y,, (the client could bind,
	// and sees the server does not offer it). p=… asks for binding, which
	// was not offered.
	var bare string
	switch {
	case strings.HasPrefix(m, "n,"), strings.HasPrefix(m, "y,"):
		i := strings.Index(m[2:], ",")
		if i < 0 {
			return "", errors.New("malformed SCRAM message: no gs2 header")
		}
		if m[2:2+i] != "" {
			return "", errors.New("SCRAM authorization identities are not supported")
		}
		bare = m[2+i+1:]
	case strings.HasPrefix(m, "p="):
		return "", errors.New("SCRAM channel binding was not offered (the server offers SCRAM-SHA-256 only)")
	default:
		return "", errors.New("malformed SCRAM message: no gs2 header")
	}
	var cnonce string
	for _, attr := range strings.Split(bare, ",") {
		if strings.HasPrefix(attr, "r=") {
			cnonce = attr[2:]
		}
		if strings.HasPrefix(attr, "m=") {
			return "", errors.New("SCRAM extensions are not supported")
		}
	}
	if cnonce == "" {
		return "", errors.New("malformed SCRAM message: no client nonce")
	}
	snonce := make([]byte, 18)
	if _, err := rand.Read(snonce); err != nil {
		return "", err
	}
	s.nonce = cnonce + base64.StdEncoding.EncodeToString(snonce)
	s.clientFirstBare = bare
	s.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(s.v.salt), s.v.iterations)
	return s.serverFirst, nil
}

// final takes the client's final message and returns the server's, or
// errBadPassword.
func (s *scram) final(msg []byte) (string, error) {
	m := string(msg)
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return "", errors.New("malformed SCRAM message: no proof")
	}
	withoutProof, proof64 := m[:i], m[i+3:]
	var binding, nonce string
	for _, attr := range strings.Split(withoutProof, ",") {
		switch {
		case strings.HasPrefix(attr, "c="):
			binding = attr[2:]
		case strings.HasPrefix(attr, "r="):
			nonce = attr[2:]
		}
	}
	if nonce != s.nonce {
		return "", errors.New("SCRAM nonce mismatch")
	}
	if cb, err := base64.StdEncoding.DecodeString(binding); err != nil || (string(cb) != "n,," && string(cb) != "y,,") {
		return "", errors.New("SCRAM channel binding mismatch")
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil || len(proof) != sha256.Size {
		return "", errors.New("malformed SCRAM proof")
	}
	auth := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	sig := hmacSHA256(s.v.storedKey, auth)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ sig[j]
	}
	stored := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(stored[:], s.v.storedKey) != 1 {
		return "", errBadPassword
	}
	return "v=" + base64.StdEncoding.EncodeToString(hmacSHA256(s.v.serverKey, auth)), nil
}
