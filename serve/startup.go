package serve

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// maxMessage bounds a message a client sends (a query's text, a Bind's
// parameters): past it the session ends with an error, rather than the
// server holding whatever a client claims to send.
const maxMessage = 16 << 20

// startup reads a connection's startup: TLS if the client asks for it
// and the server has a certificate, a cancel request (handled, and the
// connection closed), or the startup message, whose user is
// authenticated and whose database names the session's worlds. A
// malformed packet gets an error and the connection is closed.
func (s *Server) startup(c net.Conn) (*session, error) {
	c.SetDeadline(time.Now().Add(startupTimeout))
	be := pgproto3.NewBackend(c, c)
	secure := false
	var sm *pgproto3.StartupMessage
	for sm == nil {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			if isEOF(err) {
				return nil, err
			}
			fatal(be, errorf(codeProtocolViolation, "invalid startup packet: %v", err))
			return nil, fmt.Errorf("startup: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if s.opts.TLS == nil || secure {
				if _, err := c.Write([]byte{'N'}); err != nil {
					return nil, err
				}
				continue
			}
			if _, err := c.Write([]byte{'S'}); err != nil {
				return nil, err
			}
			tc := tls.Server(c, s.opts.TLS)
			if err := tc.Handshake(); err != nil {
				return nil, fmt.Errorf("TLS handshake: %w", err)
			}
			c, secure = tc, true
			be = pgproto3.NewBackend(c, c)
		case *pgproto3.GSSEncRequest:
			if _, err := c.Write([]byte{'N'}); err != nil {
				return nil, err
			}
		case *pgproto3.CancelRequest:
			s.cancel(int32(m.ProcessID), m.SecretKey)
			return nil, errHandled
		case *pgproto3.StartupMessage:
			// Decode reuses the message's storage only for its fields;
			// the parameters map is its own.
			sm = &pgproto3.StartupMessage{ProtocolVersion: m.ProtocolVersion, Parameters: m.Parameters}
		}
	}
	params := sm.Parameters
	user := params["user"]
	if user == "" {
		fatal(be, errorf(codeInvalidAuthorization, "no PostgreSQL user name specified in startup packet"))
		return nil, errHandled
	}
	// Protocol 3.2 and the _pq_ options are answered with what this
	// server speaks: 3.0, no options.
	var unknown []string
	for k := range params {
		if strings.HasPrefix(k, "_pq_.") {
			unknown = append(unknown, k)
		}
	}
	if sm.ProtocolVersion != pgproto3.ProtocolVersion30 || len(unknown) > 0 {
		be.Send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unknown})
	}
	if err := s.authenticate(be, user); err != nil {
		return nil, err
	}
	database := params["database"]
	if database == "" {
		database = user // as PostgreSQL: the user's name
	}
	se := newSession(s, c, be, user, database)
	worlds := strings.Split(database, ",")
	for _, w := range worlds {
		if _, err := s.catalog(se.ctx, w); err != nil {
			se.stop(errHandled)
			fatal(be, err)
			return nil, errHandled
		}
	}
	se.worlds = worlds
	if err := se.startupSettings(params); err != nil {
		se.stop(errHandled)
		fatal(be, err)
		return nil, errHandled
	}
	if !s.register(se) {
		se.stop(errHandled)
		fatal(be, errorf(codeTooManyConnections, "sorry, too many clients already (worldfs serve --max-conns %d)", s.opts.MaxConns))
		return nil, errHandled
	}
	be.Send(&pgproto3.AuthenticationOk{})
	for _, k := range reportedSettings {
		v, _ := se.setting(k)
		be.Send(&pgproto3.ParameterStatus{Name: k, Value: v})
	}
	be.Send(&pgproto3.BackendKeyData{ProcessID: uint32(se.pid), SecretKey: se.secret})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		s.unregister(se)
		se.stop(errClientGone)
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return se, nil
}

// authenticate asks user for the password by SCRAM-SHA-256, if the
// server has one.
func (s *Server) authenticate(be *pgproto3.Backend, user string) error {
	if s.verifier == nil {
		return nil
	}
	failed := func(err error) error {
		fatal(be, &wireError{code: codeInvalidPassword, msg: fmt.Sprintf("password authentication failed for user %q", user)})
		return fmt.Errorf("user %q: %w", user, err)
	}
	be.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{scramMechanism}})
	if err := be.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return err
	}
	if err := be.Flush(); err != nil {
		return err
	}
	msg, err := be.Receive()
	if err != nil {
		return err
	}
	first, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok {
		fatal(be, errorf(codeProtocolViolation, "expected a SASL response, got %T", msg))
		return errHandled
	}
	if first.AuthMechanism != scramMechanism {
		return failed(fmt.Errorf("mechanism %q", first.AuthMechanism))
	}
	x := &scram{v: s.verifier}
	reply, err := x.first(first.Data)
	if err != nil {
		return failed(err)
	}
	be.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(reply)})
	if err := be.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return err
	}
	if err := be.Flush(); err != nil {
		return err
	}
	msg, err = be.Receive()
	if err != nil {
		return err
	}
	final, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		fatal(be, errorf(codeProtocolViolation, "expected a SASL response, got %T", msg))
		return errHandled
	}
	reply, err = x.final(final.Data)
	if err != nil {
		return failed(err)
	}
	be.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(reply)})
	return nil
}

// fatal sends err as a FATAL error (the connection then closes).
func fatal(be *pgproto3.Backend, err error) {
	code, msg, hint := classify(err, 0)
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg, Hint: hint})
	_ = be.Flush()
}

func isEOF(err error) bool {
	var ne net.Error
	return errors.Is(err, net.ErrClosed) || errors.As(err, &ne) && ne.Timeout() || strings.Contains(err.Error(), "EOF")
}
